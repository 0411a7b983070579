"""Legacy tensor constructors (`torch.FloatTensor([...])`, `torch.LongTensor(2, 3)`,
`torch.FloatTensor(x.size())`, `torch.Tensor(n)` in the default dtype): calls
of tensor types, which no TorchFunctionMode sees. Recorded as the factory each stands for:
data from Python numbers -> `torch.tensor(data, dtype=...)` (a constant of the record: the
numbers are the guard's or the code's), sizes -> `torch.empty(sizes, dtype=...)`
(uninitialized: the graph counts as random). Anything else (a tensor, a storage, a size
that is not an int) is left to the annotation, which stops capture."""
import torch

from .torch_calls import storage_id

_DTYPES = {torch.FloatTensor: torch.float32, torch.DoubleTensor: torch.float64,
           torch.HalfTensor: torch.float16, torch.BFloat16Tensor: torch.bfloat16,
           torch.LongTensor: torch.int64, torch.IntTensor: torch.int32,
           torch.ShortTensor: torch.int16, torch.CharTensor: torch.int8,
           torch.ByteTensor: torch.uint8, torch.BoolTensor: torch.bool}
_NUMBERS = (bool, int, float)


def _numbers(value, depth=8):
    if type(value) in _NUMBERS:
        return True
    return depth > 0 and type(value) in (list, tuple) and \
        all(_numbers(v, depth - 1) for v in value)


def legacy_factory(fn, args, kw_values):
    """(factory, fx args, fx kwargs, random) for `fn(*args)` a legacy constructor call this
    module records, else None."""
    if fn is torch.Tensor:  # torch.Tensor(n), torch.Tensor([...]): the default dtype
        dtype = torch.get_default_dtype()
    else:
        dtype = _DTYPES.get(fn) if isinstance(fn, type) else None
    if dtype is None or kw_values:
        return None
    if len(args) == 1 and type(args[0]) is torch.Size:  # torch.FloatTensor(x.size())
        args = tuple(args[0])
    elif len(args) == 1 and type(args[0]) in (list, tuple) and _numbers(args[0]):
        return torch.tensor, (args[0],), {"dtype": dtype}, False
    if all(type(a) is int for a in args):  # sizes (none: an empty tensor)
        return torch.empty, (tuple(args),), {"dtype": dtype}, True
    return None


def record_legacy(mon, fn, args, kw_values, set_post):
    """Record a legacy constructor call; True when taken (the call then runs unwatched)."""
    made = legacy_factory(fn, args, kw_values)
    if made is None:
        return False
    factory, fx_args, fx_kwargs, random = made
    rec = mon.recorder

    def after(out):
        if not isinstance(out, torch.Tensor):
            mon.stop(f"legacy constructor returned a {type(out).__name__}")
            return
        node = rec.graph.call_function(factory, fx_args, fx_kwargs)
        rec._bind(out, node)
        if random:
            rec.random = True
        else:
            rec.const.add(node)  # made from constants only: Python may read it
            mon.opaque += 1  # our own read of its memory's identity, not the program's
            try:
                rec.const_memory[node] = storage_id(out)
            finally:
                mon.opaque -= 1
    set_post(after)
    return True
