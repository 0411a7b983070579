"""numpy on tensor data, traced into the operator graph through `torch._numpy` (as Dynamo
does): `t.numpy()`, ndarray math (`np.tile`, `np.sqrt`, `a * 2`, `a.reshape(...)`, `a[i]`)
and the way back (`torch.from_numpy`, `torch.tensor`, `torch.as_tensor`).

The monitor run is the program's real run, so numpy computes for real; what changes is
what the program holds. `t.numpy()` hands out a `TracedArray` (an ndarray subclass viewing
the same memory) bound to a graph node of `t`. numpy's own dispatch protocols bring every
call on one back here: `__array_function__` (np.tile, np.concatenate, np.mean ...),
`__array_ufunc__` (np.sqrt, operators), plus the ndarray methods overridden below. Each such
call computes numpy's result (unwatched: numpy's Python code is not the program's), records
one graph node calling the `torch._numpy` function of the same name on the node's tensors
(`numpy_call`, `numpy_method`), and checks, on this run's real values, that `torch._numpy`
gives numpy's result (same dtype and shape, equal within eagerc.testing's tolerance); a
difference stops capture, so a record never computes what numpy would not. The result is
again a `TracedArray` bound to the new node.

What stops instead (the program continues, correctly, eagerly): a value read of a traced
array (`float(a)`, `a.tolist()`, printing it, iterating it), a numpy scalar computed from
one (`a.sum()` gives np.float32), an in-place write (`a[0] = 1`, `out=`), a function
`torch._numpy` lacks, mixing a traced array with an ndarray that is not (its data has no
node), a numpy native other than a dispatched function or ufunc (`np.asarray(a)` would
hand out an untraced ndarray), symbolic runs (sizes read from an array would be baked).
numpy on values that are not tensor-derived is unchanged (annotations.NUMPY: pure on
Python numbers and on arrays from outside guarded by value; a stop on larger outside
arrays, which are guarded by type only).

Plain ndarrays reaching the graph (an index `x[:, self.perm]`, `torch.from_numpy(a)`,
`torch.tensor(a)`, an argument next to a traced array) are folded: `array_node` puts their
elements into the graph's code as a constant of the dtype torch.as_tensor gives. An array
from outside is foldable when guards.snapshot guards it by value (dtype, shape, contents:
up to guards.ARRAY_VALUE_LIMIT elements); one the run made comes from numpy on guarded
values. Where torch would share the array's memory (from_numpy, as_tensor), a write into
the array or the tensor during the call stops capture at the end of the run.
"""
import threading

import torch

from . import active_monitor
from .capture_stop import CaptureStop
from .guards import ARRAY_VALUE_LIMIT

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is optional; nothing here is reached then
    np = None

_local = threading.local()  # .depth: >0 while our own numpy code runs (unwatched)
TENSOR_CALLS = frozenset(("numpy", "tensor", "as_tensor", "asarray"))
NOT_TRACED = object()


# -- graph targets: what a record's graph calls (module-level, so graph source names them) --
def _tnp():
    import torch._numpy as tnp
    return tnp


def _wrap(value):
    if isinstance(value, torch.Tensor):
        return _tnp().ndarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _wrap(v) for k, v in value.items()}
    return value


def _unwrap(value):
    tnp = _tnp()
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, (list, tuple)):
        return tuple(_unwrap(v) for v in value)
    return value


def _function(name):
    fn = _tnp()
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def numpy_call(name, *args, **kwargs):
    """`torch._numpy.<name>(*args, **kwargs)` on tensors (each an ndarray's data)."""
    return _unwrap(_function(name)(*_wrap(args), **_wrap(kwargs)))


def numpy_method(name, self, *args, **kwargs):
    """`torch._numpy.ndarray(self).<name>(*args, **kwargs)` on tensors."""
    return _unwrap(getattr(_tnp().ndarray(self), name)(*_wrap(args), **_wrap(kwargs)))


def to_tensor(t, dtype=None, device=None, copy=True):
    """`torch.tensor(a)` / `torch.as_tensor(a)` / `torch.from_numpy(a)` of an array whose
    data is `t`: a copy for torch.tensor, else `t` itself (as_tensor converts only when
    asked to)."""
    out = t.to(dtype=dtype, device=device)
    return out.clone() if copy and out is t else out


def array_constant(values, dtype, shape):
    """A numpy array the record folded (guarded by value, or made by numpy on Python
    numbers), as torch converts it: its elements (flat), torch dtype and shape."""
    return torch.tensor(values, dtype=dtype).reshape(shape)


# -- the monitor run's side --------------------------------------------------------------
def _monitor():
    """The monitor run recording on this thread, None when none is (or ours runs)."""
    mon = active_monitor.current()
    if mon is None or mon.stopped is not None or getattr(_local, "depth", 0):
        return None
    return mon


class _Unwatched:
    """Our numpy calls run unwatched and unrecorded (numpy's Python code, our checks)."""

    def __init__(self, mon):
        self.mon = mon

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1
        if self.mon is not None:
            self.mon.suspend += 1
            self.mon.opaque += 1

    def __exit__(self, *exc):
        _local.depth -= 1
        if self.mon is not None:
            self.mon.suspend -= 1
            self.mon.opaque -= 1


def is_plain_array(value):
    return np is not None and type(value) is np.ndarray


def _fold_refusal(mon, arr):
    """Why `arr` (a plain ndarray) cannot be a constant of the record, or None: an array
    from outside must be guarded by value (guards.snapshot), one the run made is numpy on
    guarded values."""
    if arr.dtype.kind not in "biufc":
        return f"a numpy array of dtype {arr.dtype} in the operator graph"
    if arr.size > ARRAY_VALUE_LIMIT:
        return f"a numpy array of {arr.size} elements in the operator graph (too large to fold)"
    if mon.unguarded_array(arr):
        return "a numpy array not guarded by value (a call's argument, a larger array)"
    return None


def array_node(rec, arr):
    """A graph node for plain ndarray `arr`: its values folded as a constant tensor (the
    dtype and shape torch.as_tensor gives). Raises CaptureStop when it cannot be."""
    why = _fold_refusal(rec.monitor, arr)
    if why is not None:
        raise CaptureStop(why)
    with _Unwatched(None):
        dtype = torch.from_numpy(np.empty(0, arr.dtype)).dtype
        values = tuple(np.ravel(arr).tolist())
    node = rec.graph.call_function(array_constant, (values, dtype, tuple(arr.shape)))
    rec.const.add(node)
    return node


def _note_alias(rec, arr):
    """`arr` was folded where torch shares its memory (torch.from_numpy, as_tensor): the
    folded values are the record's only while nothing writes the array (or the tensor)
    during the call; `aliases_changed` checks that at the end of the run."""
    rec.__dict__.setdefault("numpy_aliases", []).append((arr, arr.tobytes()))


def aliases_changed(rec):
    """A stop reason when an array folded where torch shares its memory was written during
    the run (`arr[0] = 5` after `t = torch.from_numpy(arr)`), else None."""
    for arr, data in rec.__dict__.get("numpy_aliases", ()):
        with _Unwatched(None):
            if arr.tobytes() != data:
                return "numpy array sharing memory with a tensor written during the call"
    return None


def _table(rec):
    """id(array) -> (array, node) of the traced arrays of a run (held: their ids stay)."""
    table = rec.__dict__.get("numpy_nodes")
    if table is None:
        table = rec.__dict__["numpy_nodes"] = {}
    return table


def _bind(rec, arr, node):
    view = arr.view(TracedArray)
    _table(rec)[id(view)] = (view, node)
    return view


def _as_plain(arr):
    return np.ndarray.view(arr, np.ndarray)  # (TracedArray.view is a value read: a stop)


def _plain(value):
    """Arguments as numpy sees them without us: TracedArrays as plain ndarray views."""
    if isinstance(value, TracedArray):
        return _as_plain(value)
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


class _Stop(Exception):
    pass


def _to_fx(rec, value):
    """Graph arguments: traced arrays as their nodes, dtypes by name, plain values as is."""
    if isinstance(value, TracedArray):
        entry = _table(rec).get(id(value))
        if entry is None or entry[0] is not value:
            raise _Stop("numpy array derived from tensor data by an untraced operation")
        return entry[1]
    if isinstance(value, np.ndarray):
        if type(value) is np.ndarray and _fold_refusal(rec.monitor, value) is None:
            return array_node(rec, value)
        raise _Stop("numpy call mixing tensor data with another ndarray")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, torch.Tensor):
        raise _Stop("numpy call on a tensor")
    if type(value) in (list, tuple):
        return type(value)(_to_fx(rec, v) for v in value)
    if type(value) is dict:
        return {k: _to_fx(rec, v) for k, v in value.items()}
    if value is None or type(value) in (int, float, bool, str, complex, slice) or \
            value is Ellipsis:
        if type(value) is slice:
            return slice(_to_fx(rec, value.start), _to_fx(rec, value.stop),
                         _to_fx(rec, value.step))
        return value
    raise _Stop(f"numpy call with a {type(value).__name__} argument")


def _real_args(rec, value):
    """The graph arguments' values in this run: each traced array's data as a tensor."""
    if isinstance(value, TracedArray):
        return torch.from_numpy(np.ascontiguousarray(_as_plain(value)))
    if type(value) is np.ndarray:  # a folded array (array_node)
        return torch.from_numpy(np.ascontiguousarray(value))
    if type(value) in (list, tuple):
        return type(value)(_real_args(rec, v) for v in value)
    if type(value) is dict:
        return {k: _real_args(rec, v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    return value


def _agrees(real, expect):
    """Whether torch._numpy's result `expect` is numpy's `real` (arrays, or tuples of)."""
    if isinstance(real, np.ndarray):
        if not isinstance(expect, torch.Tensor) or real.dtype.hasobject:
            return False
        got = torch.from_numpy(np.ascontiguousarray(real))
        if got.dtype != expect.dtype or tuple(got.shape) != tuple(expect.shape):
            return False
        from eagerc.testing import assert_close
        try:
            assert_close(expect.detach().cpu(), got, equal_nan=True)
        except AssertionError:
            return False
        return True
    if isinstance(real, (tuple, list)) and isinstance(expect, (tuple, list)):
        return len(real) == len(expect) and all(_agrees(r, e) for r, e in zip(real, expect))
    return False


def _record(mon, label, target, fx_head, real_fn, args, kwargs):
    """One traced numpy call: numpy's result for the program, a graph node for the record.
    `target(*fx_head, *args, **kwargs)` on tensors is the node; `real_fn` numpy's call."""
    rec = mon.recorder
    with _Unwatched(mon):
        out = real_fn(*_plain(args), **_plain(kwargs))  # the program's own result
        try:
            if rec.symbolic:
                raise _Stop("numpy on tensor data in a symbolic run")
            if "out" in kwargs and kwargs["out"] is not None:
                raise _Stop(f"numpy call writing out=: {label}")
            fx_args, fx_kwargs = _to_fx(rec, args), _to_fx(rec, kwargs)
            if isinstance(out, np.generic) or (isinstance(out, (tuple, list)) and any(
                    not isinstance(o, np.ndarray) for o in out)):
                raise _Stop(f"numpy scalar from tensor data: {label}")
            if not isinstance(out, (np.ndarray, tuple, list)):
                raise _Stop(f"numpy result of type {type(out).__name__}: {label}")
            try:
                expect = target(*fx_head, *_real_args(rec, args), **_real_args(rec, kwargs))
            except Exception as e:  # noqa: BLE001 - torch._numpy lacks it or refuses it
                raise _Stop(f"numpy call not traceable by torch._numpy: {label} "
                            f"({type(e).__name__})") from None
            if not _agrees(out, expect):
                raise _Stop(f"numpy call differs under torch._numpy: {label}")
        except _Stop as e:
            mon.stop(str(e))
            return out
        node = rec.graph.call_function(target, tuple(fx_head) + tuple(fx_args), fx_kwargs)
        if isinstance(out, np.ndarray):
            return _bind(rec, out, node)
        import operator
        return type(out)(_bind(rec, o, rec.graph.call_function(operator.getitem, (node, i)))
                         for i, o in enumerate(out))


def _numpy_name(func):
    """torch._numpy's name for a numpy function (np.linalg.norm -> 'linalg.norm')."""
    mod = getattr(func, "__module__", "") or ""
    name = func.__name__
    for sub in ("linalg", "fft"):
        if mod.startswith(f"numpy.{sub}") or mod.startswith(f"numpy._core.{sub}"):
            return f"{sub}.{name}"
    return name


# Methods traced through torch._numpy's ndarray; the rest of ndarray's C methods are
# unannotated natives to the monitor (a stop).
_METHODS = ("reshape astype transpose copy flatten ravel squeeze sum mean max min std var "
            "prod clip swapaxes repeat dot argmax argmin cumsum cumprod all any round "
            "__getitem__").split()
# Reads of the array's values by Python: capture stops (the values are the tensor's).
_VALUE_READS = ("tolist item tobytes __float__ __int__ __index__ __bool__ __complex__ "
                "__iter__ __repr__ __str__ __format__ __array__ __reduce__ __reduce_ex__ "
                "__setitem__ fill itemset view __buffer__ __dlpack__ base").split()
_WRITES = frozenset("__setitem__ fill itemset".split())

if np is not None:
    class TracedArray(np.ndarray):
        """An ndarray a monitor run made from tensor data (see the module docstring).
        Outside a monitor run it behaves as the ndarray it views."""

        def __array_function__(self, func, types, args, kwargs):
            mon = _monitor()
            if mon is None:
                with _Unwatched(None):
                    return func(*_plain(args), **_plain(kwargs))
            name = _numpy_name(func)
            return _record(mon, f"np.{name}", numpy_call, (name,), func, args, kwargs)

        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            mon = _monitor()
            real = getattr(ufunc, method) if method != "__call__" else ufunc
            if mon is None:
                with _Unwatched(None):
                    return real(*_plain(inputs), **_plain(kwargs))
            label = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            if method != "__call__":
                mon.stop(f"numpy ufunc method on tensor data: {label}")
                with _Unwatched(mon):
                    return real(*_plain(inputs), **_plain(kwargs))
            return _record(mon, label, numpy_call, (ufunc.__name__,), real, inputs, kwargs)

        @property
        def T(self):
            return self.transpose()

    def _traced_method(name):
        real = getattr(np.ndarray, name)

        def method(self, *args, **kwargs):
            mon = _monitor()
            if mon is None:
                return real(_as_plain(self), *_plain(args), **_plain(kwargs))
            return _record(mon, f"ndarray.{name}", numpy_method, (name,), real,
                           (self,) + args, kwargs)
        method.__name__ = method.__qualname__ = name
        return method

    def _value_read(name):
        real = getattr(np.ndarray, name)
        what = "written" if name in _WRITES else "read"
        if isinstance(real, property) or not callable(real):
            def getter(self):
                mon = _monitor()
                if mon is not None:
                    mon.stop(f"numpy array from tensor data {what}: ndarray.{name}")
                return getattr(_as_plain(self), name)
            return property(getter)

        def method(self, *args, **kwargs):
            mon = _monitor()
            if mon is not None:
                mon.stop(f"numpy array from tensor data {what}: ndarray.{name}")
            return real(_as_plain(self), *args, **kwargs)
        method.__name__ = method.__qualname__ = name
        return method

    for _name in _METHODS:
        setattr(TracedArray, _name, _traced_method(_name))
    for _name in _VALUE_READS:
        if hasattr(np.ndarray, _name):
            setattr(TracedArray, _name, _value_read(_name))
    TracedArray.__hash__ = None
else:  # pragma: no cover
    TracedArray = type("TracedArray", (), {})


# -- hooks: the op recorder (op_recorder.py) and the monitor's native calls (monitor.py) ------
def record_torch_call(rec, name, args, kwargs, call):
    """The op recorder's hook for `Tensor.numpy()` and `torch.tensor/as_tensor/asarray` of
    a traced array: the result, or NOT_TRACED when the call is none of ours."""
    if np is None or name not in TENSOR_CALLS or not args:
        return NOT_TRACED
    mon = rec.monitor
    if name == "numpy":
        if not isinstance(args[0], torch.Tensor) or type(args[0]) is not torch.Tensor and \
                not isinstance(args[0], torch.nn.Parameter):
            return NOT_TRACED
        with _Unwatched(None):  # (raises as eager does: requires grad, not on the CPU)
            out = call(args, kwargs)
        if rec.symbolic:
            mon.stop("numpy on tensor data in a symbolic run")
            return out
        try:
            src = rec._to_fx(args[0])
        except CaptureStop as e:
            mon.stop(str(e))
            return out
        return _bind(rec, out, rec.graph.call_method("detach", (src,)))
    if is_plain_array(args[0]):
        why = _fold_refusal(mon, args[0])
        if why is not None:
            mon.stop(why)
            with _Unwatched(None):
                return call(args, kwargs)
        return _tensor_from(rec, name, args, kwargs, call, plain=True)
    if not isinstance(args[0], TracedArray):
        return NOT_TRACED
    return _tensor_from(rec, name, args, kwargs, call)


def _tensor_from(rec, name, args, kwargs, call, plain=False):
    mon = rec.monitor
    with _Unwatched(None):  # torch reads the array itself: not the program's read
        out = call(args, kwargs)
    entry = (args[0], None) if plain else _table(rec).get(id(args[0]))
    extra = set(kwargs) - {"dtype", "device", "copy"}
    if entry is None or entry[0] is not args[0] or len(args) > 1 or extra or \
            not isinstance(out, torch.Tensor) or out.requires_grad:
        mon.stop(f"torch.{name} of a numpy array with these arguments")
        return out
    if plain:
        entry = (args[0], array_node(rec, args[0]))
        if name != "tensor":
            _note_alias(rec, args[0])
    copy = name == "tensor" or bool(kwargs.get("copy"))
    dtype, device = kwargs.get("dtype"), kwargs.get("device")
    node = rec.graph.call_function(to_tensor, (entry[1],), {
        "dtype": dtype, "device": None if device is None else torch.device(device),
        "copy": copy})
    with _Unwatched(mon):
        src = torch.from_numpy(np.ascontiguousarray(_as_plain(args[0])))
        expect = to_tensor(src, dtype, device, copy)
    if expect.dtype != out.dtype or expect.shape != out.shape:
        mon.stop(f"torch.{name} of a numpy array differs from its data")
        return out
    rec._bind(out, node)
    return out


def from_numpy_call(mon, fn, args):
    """The monitor's hook for `torch.from_numpy(a)` (a native the op recorder does not
    see): a post-call action binding its result to `a`'s node, or None when `a` is not a
    traced array."""
    if np is None or fn is not torch.from_numpy or len(args) != 1 or \
            not isinstance(args[0], np.ndarray):
        return None
    arr, rec = args[0], mon.recorder
    if type(arr) is np.ndarray:  # folded as a constant: a tensor of its values
        why = _fold_refusal(mon, arr)
        if why is not None:
            mon.stop(why)
            return None

        def folded(out):
            if isinstance(out, torch.Tensor):
                rec._bind(out, rec.graph.call_function(to_tensor, (array_node(rec, arr),),
                                                       {"copy": False}))
                _note_alias(rec, arr)
        return folded
    if not isinstance(arr, TracedArray):
        return None

    def after(out):
        entry = _table(rec).get(id(arr))
        if entry is None or entry[0] is not arr or not isinstance(out, torch.Tensor):
            mon.stop("torch.from_numpy of a numpy array derived by an untraced operation")
            return
        rec._bind(out, rec.graph.call_function(to_tensor, (entry[1],), {"copy": False}))
    return after


def traced_node(rec, obj):
    """The graph node of `obj` when it is a traced array of this run (the mock rebuilds it
    as that node's tensor's `.numpy()`), else None."""
    if np is None or not isinstance(obj, TracedArray):
        return None
    entry = _table(rec).get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


def native_on_traced(fn, values, depth=3):
    """A stop reason when a numpy native that is neither a dispatched function nor a ufunc
    (whose calls come back here through numpy's protocols) gets a traced array: it could
    hand out its data untraced (`np.asarray(a)`). None otherwise."""
    if np is None or isinstance(fn, np.ufunc) or type(fn).__name__ == "_ArrayFunctionDispatcher":
        return None
    for v in values:
        if isinstance(v, TracedArray) or depth and type(v) in (list, tuple) and \
                native_on_traced(fn, v, depth - 1):
            return f"numpy native on tensor data: {getattr(fn, '__name__', fn)}"
    return None
