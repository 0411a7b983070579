"""TorchScript functions the program calls (`torch.jit.script` on a function: vits'
`fused_add_tanh_sigmoid_multiply`, diffwave's `silu`). The interpreter runs their ops below
the op recorder, so a call is one graph node: a named shim calling the function, its name
carrying a digest of the function's TorchScript code (graph caches key on the graph's
code). Compilers trace through it at the dispatcher (AOTAutograd, Inductor); the eager
backend calls it. Only functions whose graph has no in-place op, no random op and no call
of another function or method are taken, with tensors and plain numbers as positional
arguments; any other call still stops ("torch native not seen by the op recorder").

A program may wrap `ScriptFunction.__call__` (and ScriptMethod's) in Python
(torch.testing._internal.common_utils does on import, for its profiling runs): the monitor
follows the wrapper, which ends in the native `__call__` with the function as its first
argument (`native_call` unwraps that call; a ScriptMethod, a ScriptModule's, stops as when
called directly).
"""
import hashlib
import types

import torch

from .capture_stop import CaptureStop

_RANDOM = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "poisson",
           "exponential", "geometric", "cauchy", "log_normal")
_shims = {}  # id(ScriptFunction) -> (function, shim)


def _pure(block):
    for node in block.nodes():
        kind = node.kind()
        name = kind.split("::", 1)[-1]
        if kind in ("prim::CallFunction", "prim::CallMethod", "prim::PythonOp") or \
                (kind.startswith("aten::") and name.endswith("_") and not name.endswith("__")) \
                or any(r in name for r in _RANDOM):
            return False
        if not all(_pure(b) for b in node.blocks()):
            return False
    return True


def shim(fn):
    """The graph target calling ScriptFunction `fn`."""
    entry = _shims.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1]
    digest = hashlib.sha1(fn.code.encode()).hexdigest()[:12]

    def run(*args):
        return fn(*args)
    run.__name__ = run.__qualname__ = f"script_{fn.name}_{digest}"
    _shims[id(fn)] = (fn, run)
    return run


def native_call(fn, args):
    """(callee, arguments) when `fn(*args)` is the native `__call__` of a TorchScript
    function or method called explicitly with its callee first
    (`torch._C.ScriptFunction.__call__`, kept by a Python wrapper that replaced it on the
    class), else None. The native is a pybind11 method of torch._C named __call__;
    pybind11 refuses any other one on a ScriptFunction or ScriptMethod."""
    if not args or type(args[0]) not in (torch.jit.ScriptFunction, torch._C.ScriptMethod):
        return None
    native = getattr(fn, "__func__", fn)
    if type(native) is not types.BuiltinFunctionType or native.__name__ != "__call__" or \
            getattr(native, "__module__", None) != "torch._C":
        return None
    return args[0], tuple(args[1:])


def script_call(mon, fn, args, kw_values):
    """The monitor's hook for a call of a TorchScript function: a post-call action recording
    it as one node, or None (not one, or not one taken: the caller stops)."""
    if type(fn) is not torch.jit.ScriptFunction or kw_values or mon.recorder.symbolic:
        return None
    for a in args:
        if not isinstance(a, torch.Tensor) and type(a) not in (int, float, bool) or \
                type(a) is float and id(a) in mon.lifted:
            return None
    try:
        if not _pure(fn.graph):
            return None
    except Exception:  # noqa: BLE001 - a graph not inspectable: not taken
        return None
    rec = mon.recorder

    def after(out):
        try:
            fx_args = rec._to_fx(tuple(args))
        except CaptureStop as e:
            mon.stop(str(e))
            return
        node = rec.graph.call_function(shim(fn), tuple(fx_args))
        if not rec._bind(out, node):
            mon.stop(f"TorchScript function result of type {type(out).__name__}")
    return after
