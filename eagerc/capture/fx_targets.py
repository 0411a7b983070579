"""What a recorded graph's generated source can name (FX writes it as Python source).

FX writes a torch function by its qualified name and a constant by its repr; both must
evaluate back to the same thing in the graph's source (and so in a compiled graph's cache
key). `fx_target` picks a target that does, `as_graph_constant` turns numpy scalars and
Python types used as dtypes into values whose repr does.
"""
import torch

_PY_DTYPES = {int: torch.int64, float: torch.float64, bool: torch.bool,
              complex: torch.complex128}
_NUMBERS = (int, float, complex)  # and subclasses other than bool: plain values in the graph
_PY_NUMBER = {"b": bool, "i": int, "f": float, "c": complex}


def _number_kind(value):
    if isinstance(value, bool):
        return "b"
    return "i" if isinstance(value, int) else "f" if isinstance(value, float) else "c"


def is_numpy_scalar(value):
    return type(value).__module__ == "numpy" and hasattr(value, "item") and \
        getattr(value, "shape", None) == ()


def as_graph_constant(value):
    """(True, constant for the graph) for numbers, strings and dtypes given in other types
    (np.float64 is a float whose repr names numpy; `dtype=int`), else (False, None)."""
    if isinstance(value, _NUMBERS) or is_numpy_scalar(value):
        # torch treats a numpy scalar as the Python number it holds
        return True, (value.item() if hasattr(value, "item") else
                      _PY_NUMBER[_number_kind(value)](value))
    if isinstance(value, str):
        return True, str(value)
    if type(value) is type and value in _PY_DTYPES:  # dtype=int: torch reads it so
        return True, _PY_DTYPES[value]
    return False, None


_TENSOR_NAMES = {}  # id(attribute of torch.Tensor) -> its name there


def fx_target(func, name):
    """('call_method', name) or ('call_function', f) for a torch API, such that the graph's
    generated source finds it again: FX writes torch functions by their qualified name, and
    some (Tensor.__pow__ is a wrapper named `torch._tensor.pow`, method-wrappers have no
    module) do not resolve. Those become Tensor methods by the name torch.Tensor gives them,
    or a named Python shim FX keeps as a global."""
    if _is_tensor_method(func, name):
        return "call_method", name
    if _resolves(func):
        return "call_function", func
    if not _TENSOR_NAMES:
        for n in dir(torch.Tensor):
            try:
                _TENSOR_NAMES.setdefault(id(getattr(torch.Tensor, n)), n)
            except Exception:  # noqa: BLE001, S112 - a property that fails on the class
                continue
    tname = _TENSOR_NAMES.get(id(func))
    if tname is not None and getattr(torch.Tensor, tname, None) is func:
        return "call_method", tname
    return "call_function", _shim(func)


def _resolves(func):
    from torch.fx.node import _get_qualified_name
    try:
        qualname = _get_qualified_name(func)
    except Exception:  # noqa: BLE001 - no __module__ (method-wrapper) or no name
        return False
    if qualname.startswith("_operator.") or "." not in qualname:
        return True
    module, _, path = qualname.partition(".")
    obj = __import__(module)
    try:
        for part in path.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return False
    return obj is func


_SHIMS = {}


def _shim(func):
    """A Python function calling `func`, named after it (the graph's source, hence a compiled
    graph's cache key, names it)."""
    shim = _SHIMS.get(id(func))
    if shim is None:
        label = getattr(func, "__qualname__", None) or getattr(func, "__name__", "op")
        owner = getattr(func, "__self__", None)
        if owner is not None and not isinstance(owner, type(torch)):
            label = f"{type(owner).__name__}_{label}"

        def shim(*args, **kwargs):
            return func(*args, **kwargs)
        shim.__name__ = shim.__qualname__ = "eagerc_" + "".join(
            c if c.isalnum() else "_" for c in str(label))
        shim.__module__ = __name__
        _SHIMS[id(func)] = (shim, func)  # func kept alive: its id stays its own
        return shim
    return shim[0]


def _is_tensor_method(func, name):
    return getattr(torch.Tensor, name, None) is func or (
        getattr(func, "__objclass__", None) is torch._C.TensorBase)
