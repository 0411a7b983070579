"""Guards (paper §4.2): does the external state of a new call match the monitored run?

`snapshot(obj)` says what to check of an object the run read from outside, taken when the run
first reached it (before any in-place update). The guard planner (guard_plan.py, `plan_guard`)
turns the guard nodes of a RefGraph (version-0 reachable from node 0) into one straight-line
Python function: each node
is resolved along its first path from node 0 into a slot and checked; every further path to an
already-resolved node becomes an aliasing check (`is`). Tensors are checked together by one
C++ `TensorGuards` call (type, dtype, device, requires_grad, sizes, strides). The function
returns the slots (the resolved objects) or None.

    >>> snapshot(3), snapshot([1, 2])[0], snapshot(len)[0]
    (('eq', <class 'int'>, 3), 'len', 'is')
"""
import keyword
import math
import types

import torch
from torch._C._dynamo.guards import TensorGuards

_BY_VALUE = (int, float, str, bytes, complex, torch.device, torch.Size, range, slice)
_BY_IDENTITY = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
                types.MethodDescriptorType, types.WrapperDescriptorType, types.CodeType,
                torch.dtype, torch.layout, torch.memory_format, bool, type(None),
                type(Ellipsis), type(NotImplemented))


def snapshot(obj):
    """What a guard checks of `obj`: ('tensor', t), ('eq', type, v), ('is', obj),
    ('len', type, n), ('keys', type, keys), ('array', dtype, shape, bytes) or
    ('type', type)."""
    t = type(obj)
    if isinstance(obj, torch.Tensor):
        return ("tensor", obj)
    if t in _BY_VALUE:
        return ("eq", t, obj)
    if isinstance(obj, _BY_IDENTITY):
        return ("is", obj)
    if isinstance(obj, (list, tuple)):
        return ("len", t, len(obj))
    if isinstance(obj, dict):
        return ("keys", t, tuple(dict.keys(obj)))
    if isinstance(obj, (set, frozenset)):
        return ("eq", t, t(obj))
    if t.__name__ == "ndarray" and t.__module__ == "numpy" and obj.dtype.kind in "biufc" \
            and obj.size <= ARRAY_VALUE_LIMIT:
        # numpy arrays a module holds (a permutation, a table): guarded by value, so numpy
        # on them and the graph constants made of them are the record's (numpy_ops.py)
        return ("array", obj.dtype, obj.shape, obj.tobytes())
    return ("type", t)


# Outside numpy arrays up to this many elements are guarded by value (larger: by type).
ARRAY_VALUE_LIMIT = 1 << 16


def array_differs(a, snap):
    """Whether `a` is not the array of an ("array", dtype, shape, bytes) snapshot."""
    import numpy as np
    return type(a) is not np.ndarray or a.dtype != snap[1] or a.shape != snap[2] or \
        a.tobytes() != snap[3]


def access(expr, rel, holder_obj, child_obj, consts):
    """Python source that re-reads reference `rel` of the object in `expr`."""
    kind, key = rel
    if kind == "args":
        return f"args[{key}]"
    if kind == "kw":
        return f"kwargs[{key!r}]"
    if kind in ("const", "fn"):
        return consts.add(child_obj)
    if kind == "cell":
        return f"{expr}.cell_contents"
    if kind == "ref":  # the referent of a weak reference
        return f"{expr}()"
    if kind == "global":
        return f"{expr}[{key!r}]"
    if kind == "attr":
        if isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key) and (
                not key.startswith("__") or key == "__dict__"):
            return f"{expr}.{key}"
        return f"_getattr({expr}, {key!r})"
    if kind == "item":
        if type(holder_obj) in (list, tuple, dict):
            return f"{expr}[{consts.add(key) if not is_literal(key) else repr(key)}]"
        base = dict if isinstance(holder_obj, dict) else (
            list if isinstance(holder_obj, list) else tuple)
        k = consts.add(key) if not is_literal(key) else repr(key)
        return f"{consts.add(base.__getitem__)}({expr}, {k})"
    raise ValueError(f"no guard access for relation {rel}")


def is_literal(key):
    """Whether `repr(key)` is Python source for an equal value (inf and nan are not)."""
    return type(key) in (int, str, bool, type(None)) or (type(key) is float and
                                                          math.isfinite(key))


class Consts:
    """Objects the generated code refers to, as names in its globals."""

    def __init__(self):
        self.env = {}
        self._ids = {}

    def add(self, obj):
        name = self._ids.get(id(obj))
        if name is None:
            name = f"_c{len(self.env)}"
            self.env[name] = obj
            self._ids[id(obj)] = name
        return name


def check_source(slot, snap, consts, strides):
    """One guard condition (true when the check fails), or None for tensors."""
    kind = snap[0]
    if kind == "tensor":
        return None
    if kind == "is":
        return f"{slot} is not {consts.add(snap[1])}"
    if kind == "eq":
        t, v = snap[1], snap[2]
        if t is float and v != v:  # nan equals nothing: check it is nan again
            return f"type({slot}) is not {consts.add(t)} or {slot} == {slot}"
        lit = repr(v) if is_literal(v) else consts.add(v)
        return f"type({slot}) is not {consts.add(t)} or {slot} != {lit}"
    if kind == "len":
        return f"type({slot}) is not {consts.add(snap[1])} or len({slot}) != {snap[2]}"
    if kind == "array":
        return f"{consts.add(array_differs)}({slot}, {consts.add(snap)})"
    if kind == "keys":
        cond = f"type({slot}) is not {consts.add(snap[1])} or len({slot}) != {len(snap[2])}"
        if len(snap[2]) > 1:  # the order is what iteration sees
            cond += f" or tuple({slot}) != {consts.add(snap[2])}"
        return cond
    return f"type({slot}) is not {consts.add(snap[1])}"


def tensor_guard(tensors, check_strides, dynamic=None):
    """One C++ checker for `tensors`; strides checked where `check_strides[i]`.

    `dynamic[i]`: dims of tensor i compiled as symbolic sizes. Their sizes are not checked
    here, nor are that tensor's strides (they follow the sizes): the compiled graph's shape
    guards check them (and the rank, dtype, device, requires_grad are still checked here).
    """
    dynamic = dynamic or [()] * len(tensors)
    return TensorGuards(
        *tensors,
        dynamic_dims_sizes=[[None if d in dyn else n for d, n in enumerate(t.shape)]
                            for t, dyn in zip(tensors, dynamic)],
        dynamic_dims_strides=[list(t.stride()) if s and not dyn else [None] * t.dim()
                              for t, s, dyn in zip(tensors, check_strides, dynamic)])


def value_differs(tensor, name, value):
    """Whether `tensor.<name>()` (a read of a small outside tensor's value) now gives another
    value than `value` (same type and equal, as speculate.values_ok)."""
    with torch._C.DisableTorchFunction():
        got = bool(tensor) if name == "__bool__" else getattr(tensor, name)()
    return type(got) is not type(value) or got != value


def grad_mode():
    return torch.is_grad_enabled()
