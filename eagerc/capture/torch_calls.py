"""How capture classifies a torch call by its name: metadata reads (answered, not
recorded: the guard fixes the metadata), value reads (capture stops or speculates),
random and uninitialized results, writes into tensors; and small walks over call
arguments. Shared by the op recorder (op_recorder.py) and the op stream of a stopped call
(stream.py).
"""
import torch
import torch.fx as fx

from .symbolic import SymbolicInt

# Metadata reads: fixed by the tensor guard, so they are answered and not recorded.
META = frozenset("""size dim shape dtype device ndim numel __len__ is_floating_point
    is_complex layout element_size nelement ndimension is_cuda is_cpu requires_grad
    is_sparse is_quantized is_meta names is_leaf is_mkldnn is_nested get_device is_neg
    is_conj is_inference __hash__ itemsize nbytes is_mps is_xpu is_signed""".split())
# Metadata reads that depend on the memory layout: the tensor's strides get guarded too.
STRIDE_META = frozenset("stride is_contiguous storage_offset dim_order".split())
# Reads of tensor data (or of state the guard does not cover): the result may change
# between calls with the same guard, so capture stops.
VALUE_READS = frozenset("""item tolist __bool__ __int__ __float__ __index__ __complex__
    numpy __array__ __repr__ __str__ __format__ data_ptr __reduce_ex__ __deepcopy__
    untyped_storage storage grad _version __contains__ backward register_hook
    retain_grad _base grad_fn""".split())
# Metadata reads that give the program a size (symbolic shapes: the dims it depends on are
# specialized, since Python code may compute with the value and bake it into the graph).
SIZE_READS = frozenset("""size shape numel __len__ nelement nbytes stride is_contiguous
    storage_offset dim_order __iter__""".split())
# Size reads a symbolic run answers with SymbolicInts (`len()` cannot: it makes a plain int).
SYMBOLIC_READS = frozenset("size shape numel nelement".split())
# Attribute getters that are ops.
VIEW_ATTRS = frozenset("T mT H mH real imag".split())


def func_name(func):
    """The name a torch API goes by; property getters are named after their property."""
    name = getattr(func, "__name__", "")
    if name == "__get__" and hasattr(func, "__self__"):
        return getattr(func.__self__, "__name__", ""), True
    return name, False



CONSTANTS = (int, float, bool, str, complex, torch.dtype, torch.device, torch.layout,
              torch.memory_format)
# Results of torch APIs that metadata decides (`t.type()`, `torch.result_type`): constants.
METADATA_RESULTS = (str, torch.dtype, torch.device, torch.layout, torch.memory_format)
BOOL_QUERIES = frozenset("is_same_size is_set_to is_signed can_cast is_floating_point "
                          "is_complex is_contiguous".split())

METADATA_FACTORIES = frozenset("ones_like zeros_like full_like new_ones new_zeros new_full".split())
CONST_READS = frozenset("item tolist __bool__ __int__ __float__ __index__".split())
NONDETERMINISTIC = frozenset("""rand rand_like randn randn_like randint randint_like randperm
    normal normal_ bernoulli bernoulli_ multinomial uniform_ exponential_ geometric_ cauchy_
    log_normal_ random_ poisson dropout dropout_ alpha_dropout feature_alpha_dropout
    dropout1d dropout2d dropout3d rrelu rrelu_ empty empty_like empty_strided new_empty
    new_empty_strided native_dropout set_ resize_ seed manual_seed""".split())
# Uninitialized memory: not a constant, but nothing is drawn from a generator (PyG's
# `new_empty(n).scatter_(0, inv, perm)` overwrites all of it), so a graph holding one may
# still have its value reads checked after it (speculate.py).
UNINITIALIZED = frozenset("empty empty_like empty_strided new_empty new_empty_strided".split())
# Python's in-place operators (`x += y`); `__invert__`, `__index__`, `__int__`, `__iter__`
# also start with "__i" and write nothing.
_INPLACE_DUNDERS = frozenset(f"__i{op}__" for op in "add sub mul matmul truediv floordiv mod "
                             "pow lshift rshift and xor or".split())


def storage_id(tensor):
    """Identity of a tensor's memory (its storage's address), None when it has none."""
    try:
        return tensor.untyped_storage().data_ptr() or None
    except Exception:  # noqa: BLE001 - no storage (e.g. a subclass): unknown
        return None


def fx_nodes(value):
    if isinstance(value, fx.Node):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from fx_nodes(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from fx_nodes(v)
    elif isinstance(value, slice):
        yield from fx_nodes((value.start, value.stop, value.step))


def tensors_in(value, depth=64):
    """The tensors in `value`, through tuples, lists and dicts `depth` levels deep."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_in(v, depth - 1)
    elif depth and isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v, depth - 1)


def symbolic_in(value, depth=4):
    if isinstance(value, SymbolicInt):
        yield value
    elif depth and isinstance(value, (tuple, list)):
        for v in value:
            yield from symbolic_in(v, depth - 1)
    elif depth and isinstance(value, dict):
        for v in value.values():
            yield from symbolic_in(v, depth - 1)
    elif isinstance(value, slice):
        for v in (value.start, value.stop, value.step):
            yield from symbolic_in(v, 0)


def noop_flag_write(func, name, args):
    """`t.requires_grad = False` on a tensor that does not require grad, `t.volatile = ...`
    (no effect since torch 0.4 but a warning): nothing changes
    (other tensor attribute writes stop capture; a plain Python attribute such as
    `t.some_attr` is not a descriptor write and is followed as any object's)."""
    desc = getattr(func, "__self__", None)
    attr = getattr(desc, "__name__", "")
    if attr == "volatile":  # removed from torch: setting it only warns
        return name == "__set__"
    return name == "__set__" and attr == "requires_grad" and \
        len(args) == 2 and isinstance(args[0], torch.Tensor) and args[1] is False and \
        not args[0].requires_grad


# Ops whose result's shape depends on tensor values: a record that bakes that shape into
# later ops (`torch.zeros(idx.shape[0])`, a reshape) would serve other values wrongly.
_VALUE_SHAPED = frozenset("""nonzero argwhere unique unique_consecutive masked_select
    bincount""".split())


def value_shaped(name, args, kwargs):
    """Whether the result's shape of this torch call depends on tensor values: nonzero,
    unique, masked_select, bincount, `x[mask]` with a boolean index, one-argument
    `torch.where(cond)`, `repeat_interleave` with tensor repeats and no `output_size`."""
    if name in _VALUE_SHAPED:
        return True
    if name in ("__getitem__", "index"):
        return any(t.dtype in (torch.bool, torch.uint8) for t in tensors_in(args[1:], 4))
    if name == "where":
        return len(args) + len(kwargs) == 1
    if name == "repeat_interleave":
        reps = kwargs.get("repeats", args[1] if len(args) > 1 else args[0] if args else None)
        return isinstance(reps, torch.Tensor) and kwargs.get("output_size") is None and \
            len(args) < 4
    return False


def norm_stats_written(func, args, kwargs):
    """The running statistics a batch or instance norm updates in place (in training, or
    with input statistics), which its name does not tell."""
    F = torch.nn.functional
    if func is F.batch_norm or func is F.instance_norm:
        names = ("input", "running_mean", "running_var", "weight", "bias", "flag")
    elif func is torch.batch_norm or func is torch.instance_norm:
        names = ("input", "weight", "bias", "running_mean", "running_var", "flag")
    else:
        return []
    given = dict(zip(names, args))
    given.update(kwargs)
    flag = given.get("flag", given.get("training", given.get(
        "use_input_stats", func is F.instance_norm or func is torch.instance_norm)))
    return [t for t in (given.get("running_mean"), given.get("running_var"))
            if flag and isinstance(t, torch.Tensor)]


def written_tensor(name, args, kwargs):
    """The tensor a torch call writes into, or None: in-place methods and functions
    (`add_`, `relu_`, `x += y`, `x[i] = v`), `out=` and `inplace=True`."""
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        return out
    if kwargs.get("inplace") is True or (name.endswith("_") and not name.endswith("__")) \
            or name in _INPLACE_DUNDERS or name == "__setitem__":
        return args[0] if args and isinstance(args[0], torch.Tensor) else None
    return None


def _basic_index(index):
    """Whether a __setitem__ index selects a view (ints, slices, None, Ellipsis)."""
    items = index if type(index) is tuple else (index,)
    return all(i is None or i is Ellipsis or type(i) in (int, bool, slice) for i in items)


def _addresses(t):
    """The storage offsets (in elements) of `t`'s elements."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(torch.arange(n), t.size(), t.stride(), t.storage_offset()).reshape(-1)


def order_dependent_write(name, args, kwargs, written):
    """Whether a call writing into `written` reads memory it also writes through another
    view (`x[:, 1:] = x[:, :-1]`, `x.add_(x.t())`): eager's kernel reads some elements
    after writing them (the result depends on its loop order; TensorIterator only refuses
    overlaps it can prove from dense layouts), while a graph compiled functionally
    (AOTAutograd, Inductor) reads every input before writing. Such a graph runs as
    recorded (graph_compiler.py)."""
    try:
        return _order_dependent(name, args, kwargs, written)
    except Exception:  # noqa: BLE001 - a layout not understood: run as recorded, to be safe
        return True


def _order_dependent(name, args, kwargs, written):
    dst, srcs = written, [t for t in tensors_in((args, kwargs)) if t is not written]
    if kwargs.get("out") is not written:
        srcs = [t for t in tensors_in((args[1:], kwargs))]
        if name == "__setitem__" and len(args) > 2:
            index = args[1]
            # (advanced indexing writes through index_put_: the whole tensor, to be safe)
            if _basic_index(index):
                dst = written[index]
            srcs = [t for t in tensors_in(args[2])]
    if not isinstance(dst, torch.Tensor) or not dst.numel():
        return False
    storage = storage_id(dst)
    for s in srcs:
        if s is dst or not s.numel() or storage is None or storage_id(s) != storage:
            continue
        if (s.data_ptr(), s.size(), s.stride(), s.dtype) == \
                (dst.data_ptr(), dst.size(), dst.stride(), dst.dtype):
            continue  # the same elements: each read before its own write
        lo = [t.data_ptr() + sum(min(0, (k - 1) * st) for k, st in zip(t.size(), t.stride()))
              * t.element_size() for t in (dst, s)]
        hi = [t.data_ptr() + (sum(max(0, (k - 1) * st) for k, st in zip(t.size(), t.stride()))
                              + 1) * t.element_size() for t in (dst, s)]
        if hi[0] <= lo[1] or hi[1] <= lo[0]:
            continue  # disjoint ranges
        if s.dtype != dst.dtype or dst.untyped_storage().nbytes() > 1 << 26:
            return True  # (not worth counting elements: run as recorded)
        if torch.isin(_addresses(s), _addresses(dst)).any():
            return True
    return False
