"""What the monitor asks of objects and natives: where an attribute read came from, which
natives only hold on to their arguments, plain values (an `lru_cache` key), the name a
native goes by in stop reasons."""
import types

import torch

from .symbolic import SymbolicInt

_NATIVE_SLOT = (types.GetSetDescriptorType, types.MemberDescriptorType)


def module_dict(obj):
    """A plain module's namespace (its globals), or None."""
    if type(obj) is types.ModuleType:
        d = obj.__dict__
        return d if type(d) is dict else None
    return None


def attr_source(obj, name, result):
    """Where `obj.name` came from: 'attr' (state of obj), 'class' (its class) or None
    (computed by Python code the monitor already watched, or not a reference)."""
    if isinstance(obj, types.ModuleType):
        return "attr"
    if isinstance(obj, type):
        return "class"
    cls_attr = _MISSING
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            cls_attr = klass.__dict__[name]
            break
    if cls_attr is not _MISSING and hasattr(type(cls_attr), "__set__"):
        return "attr" if isinstance(cls_attr, _NATIVE_SLOT) else None
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and name in d:
        return "attr" if d[name] is result else None
    if name == "__dict__":
        return "attr"
    return "class" if cls_attr is not _MISSING else None


_MISSING = object()

# Natives that only hold on to their arguments (or look at their types, or count them):
# a SymbolicInt passed to them keeps its node. Every other native bakes it.
_REFERENCE_ONLY = {tuple, list, isinstance, issubclass, type, id, iter, zip, reversed, len,
                   torch.Size, callable}
_REFERENCE_METHODS = {(list, "append"), (list, "extend"), (list, "copy"), (tuple, "count"),
                      (torch.Size, "__len__"), (list, "__len__"), (tuple, "__len__"),
                      (list, "__iter__"), (tuple, "__iter__"), (torch.Size, "__iter__")}


def keeps_references(fn):
    try:
        if fn in _REFERENCE_ONLY:
            return True
    except TypeError:
        return False
    owner = getattr(fn, "__self__", None) if type(fn) is types.BuiltinFunctionType else \
        getattr(fn, "__objclass__", None)
    if owner is None:
        return False
    cls = owner if isinstance(owner, type) else type(owner)
    return (cls, getattr(fn, "__name__", "")) in _REFERENCE_METHODS


def builtin_base(obj):
    for klass in type(obj).__mro__:
        if klass.__module__ in ("builtins", "collections"):
            return klass
    return object


_PLAIN = (int, float, str, bytes, bool, type(None), torch.dtype, torch.device)


def plain_values(values, depth=2):
    """Whether `values` are numbers, strings, dtypes, devices (tuples of them): an
    `lru_cache` key compared by value, not by identity (a tensor hashes by id)."""
    return all(type(v) in _PLAIN or type(v) is SymbolicInt  # baked: its value is guarded
               or (type(v) is tuple and depth and plain_values(v, depth - 1))
               for v in values)


def qualname(fn):
    owner = getattr(fn, "__objclass__", None) or getattr(fn, "__self__", None)
    mod = getattr(fn, "__module__", None) or (type(owner).__name__ if owner is not None else "")
    if owner is not None and type(owner).__module__ == "pybind11_builtins":
        return f"{mod}.{fn.__name__}"  # (its __qualname__ names the function record type)
    return f"{mod}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"
