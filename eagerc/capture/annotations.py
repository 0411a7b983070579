"""Property annotations of native functions (paper §5.2), as data tables.

Python functions need no annotation: the monitor follows into them. A native function is
looked up here; with no entry, capture stops (we cannot see what it reads or writes).

- `pure` (PureClosure): same result for the same inputs and no hidden external effect;
  False for time, randomness outside torch, I/O.
- `value_read` (ValueRead): the function reads its arguments' values. A tensor passed at such
  a position (outside a torch op) means the result depends on tensor data: capture stops.
- `inplace` (InPlace): argument positions the call may update in place (0 is `self`).
- `relation` (Relation): the reference the call reads or writes, for natives that act like
  `obj.attr` (getattr, hasattr, setattr, delattr, object.__setattr__ ...).
- `as_op` (AsOpNode): a torch API; the op recorder turns it into an operator-graph node.

Tables apply one annotation to many functions at once: all methods of immutable builtin types
are pure, every list/dict/set method that mutates is InPlace on `self`, all of `math` is pure.

    >>> lookup(len).pure, lookup([].append).inplace
    (True, (0,))
    >>> lookup(lambda: 0) is FOLLOW
    True
"""
import collections
import functools
import itertools
import math
import operator
import types
from typing import NamedTuple

import torch


class Annotation(NamedTuple):
    pure: bool = True
    value_read: bool = True
    inplace: tuple = ()
    relation: str = None
    as_op: bool = False
    numbers_only: bool = False  # pure on Python numbers; stop on arrays from outside


FOLLOW = Annotation(value_read=False)  # a Python function: the monitor runs into it
PURE = Annotation()
PURE_REF = Annotation(value_read=False)  # builds/returns references without reading values
IMPURE = Annotation(pure=False)
MUTATES_SELF = Annotation(inplace=(0,), value_read=False)
TORCH = Annotation(as_op=True, value_read=False)

_BY_OBJ = {}  # function or class object -> Annotation
_BY_METHOD = {}  # (class, method name) -> Annotation, self at position 0


def _annotate(objs, ann):
    for obj in objs:
        _BY_OBJ[obj] = ann


def _annotate_methods(cls, names, ann):
    for name in names:
        _BY_METHOD[(cls, name)] = ann


def _all_methods(cls, ann, except_=()):
    for name in dir(cls):
        if name not in except_ and callable(getattr(cls, name, None)):
            _BY_METHOD.setdefault((cls, name), ann)


# Builtins. Constructors of containers only take references (ValueRead False: a tensor argument
# is iterated through torch ops, which the op recorder sees).
_annotate([isinstance, issubclass, type, callable, id.__class__], PURE_REF)
_annotate([len, abs, min, max, sum, any, all, hash,
           round, divmod, pow, ord, chr, format, repr, ascii, bin, hex, oct, sorted,
           int, float, bool, str, bytes, complex, slice, range, object, property,
           classmethod, staticmethod, super, NotImplementedError, ValueError, TypeError,
           KeyError, IndexError, AttributeError, RuntimeError, StopIteration], PURE)
_annotate([tuple, list, dict, set, frozenset, enumerate, zip, map, filter, reversed, iter,
           collections.OrderedDict, collections.defaultdict, collections.deque,
           collections.namedtuple, types.SimpleNamespace, functools.partial,
           itertools.chain, itertools.product, itertools.repeat, itertools.islice,
           itertools.accumulate, itertools.zip_longest, itertools.starmap,
           itertools.combinations, itertools.combinations_with_replacement,
           itertools.permutations, itertools.compress, itertools.dropwhile,
           itertools.takewhile, itertools.filterfalse, itertools.groupby, itertools.count,
           itertools.cycle, functools.reduce]
          + ([itertools.pairwise] if hasattr(itertools, "pairwise") else []), PURE_REF)
# next() advances an iterator: in place on it.
_annotate([next], Annotation(inplace=(0,)))
_annotate([getattr], Annotation(relation="getattr"))
_annotate([hasattr], Annotation(relation="hasattr"))
_annotate([setattr], Annotation(relation="setattr", value_read=False))
_annotate([delattr], Annotation(relation="delattr"))
_annotate([vars], Annotation(relation="vars"))
# dir(obj): the names of its class (classes are not mutated) and of its instance __dict__,
# which the guard then checks key by key; a Python __dir__ (nn.Module's) runs watched.
_annotate([dir], Annotation(relation="dir"))
# id() only serves as an identity key (memo dicts in inspect, caches); the objects whose
# identity matters are guarded by identity.
import _abc  # noqa: E402

_annotate([id, _abc._abc_instancecheck, _abc._abc_subclasscheck, _abc._get_dump], PURE_REF)
_annotate([print, input, open, globals, locals, exec, eval, compile, breakpoint], IMPURE)
# Locks made or taken inside a call (a thread-safe cache): no state the program reads back
# (a lock is released by the time the call returns).
import _thread  # noqa: E402

_annotate([_thread.allocate_lock, _thread.RLock], PURE_REF)
_all_methods(_thread.LockType, PURE_REF)
_all_methods(_thread.RLock, PURE_REF)
# Files: writing a log or a dump is I/O the mock cannot repeat.
import io as _io  # noqa: E402

for _cls in (_io.TextIOWrapper, _io.BufferedWriter, _io.BufferedReader, _io.BufferedRandom,
             _io.FileIO):
    _all_methods(_cls, IMPURE)
# Impure: randomness outside torch's generators, clocks, the OS, I/O.
import os as _os  # noqa: E402
import random as _random  # noqa: E402
import time as _time  # noqa: E402

for _cls in (_random.Random, _random.SystemRandom):
    for _name in dir(_cls):
        if callable(getattr(_cls, _name, None)) and not _name.startswith("__"):
            _BY_METHOD[(_cls, _name)] = IMPURE
_annotate([getattr(_time, n) for n in dir(_time) if callable(getattr(_time, n))], IMPURE)
_annotate([getattr(_os, n) for n in ("getpid", "urandom", "listdir", "stat", "getcwd",
                                     "getenv", "system")], IMPURE)
_annotate([getattr(math, n) for n in dir(math) if callable(getattr(math, n))], PURE)
# operator.iadd & co. update a mutable first argument in place (an int gets a new value);
# operator.index, is_, itemgetter ... are plain functions.
_OPERATOR_INPLACE = {n for n in dir(operator) if n.startswith(("i", "__i")) and
                     n.lstrip("_")[1:].rstrip("_") in ("add", "and", "concat", "floordiv",
                                                       "lshift", "mod", "mul", "matmul", "or",
                                                       "pow", "rshift", "sub", "truediv",
                                                       "xor")}
_annotate([getattr(operator, n) for n in dir(operator)
           if callable(getattr(operator, n)) and n not in _OPERATOR_INPLACE
           and not n.startswith(("set", "del", "__set", "__del"))], PURE)
_annotate([operator.setitem, operator.delitem], MUTATES_SELF)
_annotate([getattr(operator, n) for n in _OPERATOR_INPLACE], MUTATES_SELF)
_BY_METHOD[(object, "__setattr__")] = Annotation(relation="object_setattr", value_read=False)
_BY_METHOD[(object, "__getattribute__")] = Annotation(relation="getattr")
_BY_METHOD[(object, "__delattr__")] = Annotation(relation="object_delattr")
_annotate_methods(object, ["__init__", "__new__", "__init_subclass__", "__subclasshook__",
                           "__eq__", "__ne__", "__hash__", "__repr__", "__str__", "__format__",
                           "__dir__", "__sizeof__", "__reduce_ex__"], PURE)

# Class namespaces (cls.__dict__.get(...)): classes are assumed unchanged (docs/capture.md).
_all_methods(types.MappingProxyType, PURE_REF)

# Immutable values: every method reads and returns new values.
for _cls in (str, bytes, int, float, bool, complex, tuple, frozenset, range, slice,
             type(None), torch.Size, torch.dtype, torch.device, torch.finfo, torch.iinfo):
    _all_methods(_cls, PURE, except_=("__setattr__", "__delattr__"))

# Mutable containers: the listed methods update `self` in place, every other one only reads.
_MUTATORS = {
    list: ["append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
           "__setitem__", "__delitem__", "__iadd__", "__imul__", "__init__"],
    dict: ["update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__",
           "__ior__", "__init__"],
    set: ["add", "discard", "remove", "pop", "clear", "update", "difference_update",
          "intersection_update", "symmetric_difference_update", "__ior__", "__iand__",
          "__isub__", "__ixor__", "__init__"],
    collections.OrderedDict: ["update", "setdefault", "pop", "popitem", "clear",
                              "move_to_end", "__setitem__", "__delitem__", "__init__"],
    collections.deque: ["append", "appendleft", "extend", "extendleft", "pop", "popleft",
                        "remove", "clear", "rotate", "__setitem__", "__delitem__", "__init__"],
}
for _cls, _names in _MUTATORS.items():
    _annotate_methods(_cls, _names, MUTATES_SELF)
    _all_methods(_cls, PURE_REF)

# Python functions annotated so the monitor need not run through them (paper §5.2): they
# only inspect code objects and signatures, which identity guards on functions fix.
import inspect  # noqa: E402

_annotate([inspect.signature, inspect.getfullargspec, inspect.isclass, inspect.isfunction,
           inspect.ismethod, inspect.iscoroutinefunction, inspect.unwrap], PURE_REF)

# Context variables: transformers sets and resets them around a forward. Capture assumes a
# value set during the call is reset before it returns (set/reset pairs), so they are pure.
import contextvars  # noqa: E402

_all_methods(contextvars.ContextVar, PURE_REF)
_all_methods(contextvars.Token, PURE_REF)

# Iterators advance in place when called through `next`/`__next__`.
for _it in (iter([]), iter(()), iter({}), iter(range(0)), enumerate([]), zip(), map(id, [])):
    _BY_METHOD[(type(_it), "__next__")] = Annotation(inplace=(0,))
    _BY_METHOD[(type(_it), "__iter__")] = PURE_REF

# torch utilities that are not ops: they read global torch state that the guard checks
# (grad mode) or that capture treats as fixed for a process (tracing, scripting, defaults).
_annotate([torch._C._get_tracing_state, torch.is_grad_enabled, torch.get_default_dtype,
           torch._C._is_torch_function_enabled, torch._C._has_torch_function,
           torch._C._has_torch_function_unary, torch._C._has_torch_function_variadic,
           torch.is_tensor, torch.is_floating_point, torch.is_complex,
           torch._C._get_cudnn_enabled, torch.is_autocast_enabled,
           torch._C._get_autograd_fallback_mode, torch.is_inference_mode_enabled,
           torch._C._is_any_autocast_enabled, torch.get_autocast_dtype,
           torch._C._functorch.is_functorch_wrapped_tensor,
           torch._C._get_privateuse1_backend_name, torch.finfo, torch.iinfo,
           torch.device, torch.Size, torch._C._are_functorch_transforms_active,
           torch._C._is_torch_function_mode_enabled, torch._C._get_function_stack_at,
           torch._C._len_torch_function_stack, torch.overrides.has_torch_function,
           torch.jit.is_scripting, torch._C._jit_is_script_object], PURE_REF)
# Usage logging (nn.Module.__init__, i.e. modules built inside forward), custom
# autograd.Function's dead-wrapper check (identity outside functorch transforms).
_annotate([torch._C._log_api_usage_once, torch._C._functorch.unwrap_if_dead], PURE_REF)
# torch._dynamo.disable'd functions (e.g. in nn.init) switch Dynamo's frame hook off and back
# on around their body: no state capture depends on.
_annotate([torch._C._dynamo.eval_frame.set_eval_frame], PURE_REF)
# Entering no_grad inside a captured region changes grad mode only for its duration.
_annotate([torch._C._set_grad_enabled, torch.set_grad_enabled], PURE)
# warnings.catch_warnings / filterwarnings: the filter list and the module attributes they
# change are Python state the monitor follows (and the mock replays); the native only bumps
# the version that invalidates "shown once" caches, which decides what is shown, not values.
import warnings  # noqa: E402

_annotate([warnings._filters_mutated], PURE_REF)


# torch natives named like queries read process-wide torch settings (tracing, autocast, SDPA
# backends, determinism) that capture treats as fixed for the process: pure, no tensor reads.
_QUERY_PREFIXES = ("_get_", "_is_", "is_", "_has_", "get_", "_are_", "are_", "_jit_is_")


def _torch_native(fn):
    mod = getattr(fn, "__module__", None) or ""
    if mod.startswith("torch"):
        return True
    owner = getattr(fn, "__objclass__", None) or type(getattr(fn, "__self__", None))
    return owner is not None and issubclass(owner, torch._C.TensorBase)


_BACKEND_PREFIXES = ("cuda_", "cudnn_", "xpu_", "mps_", "mkldnn_", "mtia_")


def _torch_query(fn):
    name = getattr(fn, "__name__", "")
    bare = name.lstrip("_")
    for prefix in _BACKEND_PREFIXES:
        if bare.startswith(prefix):
            bare = bare[len(prefix):]
    camel = any(bare.startswith(w) and bare[len(w):len(w) + 1].isupper()
                for w in ("is", "get", "has", "are"))  # _cuda_isCurrentStreamCapturing
    if (name.startswith(_QUERY_PREFIXES) or ("_" + bare).startswith(_QUERY_PREFIXES)
            or camel) and \
            getattr(fn, "__objclass__", None) is not torch._C.TensorBase:
        return PURE_REF
    return None


def _method_key(cls, name):
    for klass in cls.__mro__:
        ann = _BY_METHOD.get((klass, name))
        if ann is not None:
            return ann
    return None


# Python functions of libraries, annotated by name (the library is never imported here):
# they only report (a warning shown once), so the monitor does not run through them.
_BY_NAME = {
    # reads input_ids' values to decide whether to warn about padding (Dynamo skips it
    # through transformers' is_tracing check)
    ("transformers.modeling_utils", "PreTrainedModel.warn_if_padding_and_no_attention_mask"):
        PURE_REF,
}
# re's compile cache: the pattern for (pattern, flags) is the same on every call (compiled
# once, cached); followed, its cache dict went into the guard and every new pattern made
# the next identical call miss (warnings.filterwarnings compiles its message).
_BY_NAME[("re", "_compile")] = PURE_REF
# Compiled patterns and their matches are immutable: their methods compute from their
# arguments (strings the guard checks).
import re  # noqa: E402

_all_methods(re.Pattern, PURE)
_all_methods(re.Match, PURE)
# Logging from inside forward (transformers' logger.warning): a report, as warnings.warn
# (the logging machinery itself inspects frames: sys._getframe).
_BY_NAME.update({("logging", f"Logger.{name}"): PURE_REF for name in (
    "debug", "info", "warning", "warn", "error", "exception", "critical", "log",
    "isEnabledFor", "getEffectiveLevel")})


# Draws of host random numbers: the monitor replays them at mock time (Monitor._draw).
DRAW = Annotation(relation="draw")
_DRAW_METHODS = {
    "random.Random": {"random", "uniform", "gauss", "normalvariate", "triangular",
                      "betavariate", "expovariate", "gammavariate", "lognormvariate",
                      "vonmisesvariate", "paretovariate", "weibullvariate"},
    "numpy.random.mtrand.RandomState": {"rand", "randn", "random", "random_sample", "uniform",
                                        "normal", "standard_normal", "beta", "exponential",
                                        "gamma", "lognormal", "laplace"},
    "numpy.random._generator.Generator": {"random", "uniform", "normal", "standard_normal",
                                          "beta", "exponential", "gamma", "lognormal",
                                          "laplace"},
}


def _draws_of(owner):
    for k in type(owner).__mro__:
        names = _DRAW_METHODS.get(f"{k.__module__}.{k.__qualname__}")
        if names is not None:
            return names
    return ()


def draw_stream(fn, args=()):
    """The random stream object (a `random.Random`, numpy `RandomState` or `Generator`)
    when calling `fn` with `args` draws floats from it: the bound method
    (`random.random`, `np.random.rand`) or the class's method with the stream first
    (`rng.normal(...)` as the interpreter calls it); else None."""
    try:
        owner = getattr(fn, "__self__", None)
        if owner is not None and not isinstance(owner, (type, types.ModuleType)):
            return owner if fn.__name__ in _draws_of(owner) else None
        if args and not isinstance(args[0], (type, types.ModuleType)):
            name = getattr(fn, "__name__", None)
            if name in _draws_of(args[0]) and \
                    getattr(type(args[0]), name, None) is fn:
                return args[0]
    except Exception:  # noqa: BLE001 - an object whose attributes fail: not a draw
        pass
    return None


_annotate([f for f in vars(_random.Random).values() if isinstance(f, types.FunctionType)
           and f.__name__ in _DRAW_METHODS["random.Random"]], DRAW)


def lookup(fn):
    """The annotation of callable `fn`, FOLLOW for Python code, None when unknown."""
    if type(fn) is types.MethodType and draw_stream(fn) is not None:
        return DRAW
    ann = _lookup(fn)
    if ann is None:
        t = type(fn)
        if t is weakref.ReferenceType:
            return WEAKREF_CALL
        if t is functools._lru_cache_wrapper:
            # A cached function is pure by its author's word (transformers'
            # is_torch_less_or_equal, warning_once); on a miss its Python body runs watched.
            return PURE
        try:
            return _numpy_callable(fn)
        except Exception:  # noqa: BLE001 - an object whose attributes fail: unknown
            return None
    return ann


def _pybind11_record(owner):
    return type(owner).__module__ == "pybind11_builtins"


def _lookup(fn):
    t = type(fn)
    if t is types.FunctionType:
        ann = _BY_OBJ.get(fn)
        if ann is None:
            ann = _BY_NAME.get((fn.__module__, fn.__qualname__), FOLLOW)
        return ann
    if t is types.MethodType:
        if getattr(fn.__func__, "__module__", "") == "numpy.random.mtrand":
            return IMPURE
        return lookup(fn.__func__)
    if t is types.BuiltinFunctionType:  # also bound methods of builtin objects
        owner = fn.__self__
        ann = _BY_OBJ.get(fn) if _hashable(owner) else None
        if ann is not None:
            return ann
        if owner is None or isinstance(owner, types.ModuleType) or _pybind11_record(owner):
            # a module-level native (a pybind11 function's __self__ is its function record):
            # annotated by object, or by (module, name) for libraries not imported here
            ann = _BY_NAME.get((getattr(fn, "__module__", None), fn.__name__))
        elif isinstance(owner, type):  # classmethod of a builtin class, e.g. dict.fromkeys
            ann = _method_key(owner, fn.__name__) or PURE_REF
        else:
            ann = _method_key(type(owner), fn.__name__)
        if ann is None and _torch_native(fn):
            return _torch_query(fn) or TORCH
        return ann
    if t in (types.MethodDescriptorType, types.WrapperDescriptorType,
             types.ClassMethodDescriptorType):
        ann = _method_key(fn.__objclass__, fn.__name__)
        return TORCH if ann is None and _torch_native(fn) else ann
    if t is types.MethodWrapperType:
        return _method_key(type(fn.__self__), fn.__name__)
    if isinstance(fn, type):
        try:
            ann = _BY_OBJ.get(fn)
        except TypeError:
            ann = None
        if ann is not None:
            return ann
        if issubclass(fn, BaseException) or _python_class(fn):
            return FOLLOW
        return TORCH if _torch_native(fn) else None
    if isinstance(fn, functools.partial):
        return lookup(fn.func)
    call = getattr(type(fn), "__call__", None)
    if type(call) is types.FunctionType:
        return FOLLOW
    try:
        return _BY_OBJ.get(fn) or (TORCH if _torch_native(fn) else None)
    except TypeError:
        return None


def _hashable(obj):
    return obj is None or type(obj).__hash__ is not None and not isinstance(obj, (list, dict,
                                                                                  set))


def _python_class(cls):
    """A class whose instances are built by Python code or plain object/container allocation."""
    for attr in ("__new__", "__init__"):
        impl = getattr(cls, attr)
        if isinstance(impl, types.FunctionType) or isinstance(impl, staticmethod):
            continue
        owner = next((k for k in cls.__mro__ if attr in k.__dict__), object)
        if owner.__module__ not in ("builtins", "collections") and owner is not object:
            if not isinstance(owner.__dict__[attr], (types.FunctionType, staticmethod)):
                return False
    return True


# Imports inside functions: an imported module is a sys.modules lookup (the import
# machinery itself is not the program's behaviour; IMPORT_NAME is handled the same way).
import builtins  # noqa: E402
import importlib  # noqa: E402

_annotate([builtins.__import__, importlib.import_module], PURE_REF)
# By name too: a program that replaced builtins.__import__ with an import hook before this
# table was built (an import tracker, a lazy-import shim) calls the native one from its hook,
# which the monitor follows as Python code.
_BY_NAME[("builtins", "__import__")] = PURE_REF
_BY_NAME[("importlib._bootstrap", "__import__")] = PURE_REF
_BY_NAME[("importlib", "import_module")] = PURE_REF

# Warnings: reports, not state the program reads back; a mock does not repeat them (the
# default filter shows a warning once per place anyway).
import warnings  # noqa: E402

_annotate([warnings.warn, warnings.warn_explicit], PURE_REF)

# Weak references: making one only holds a reference; calling one reads its referent,
# which the guard re-reads the same way (`ref()`), see monitor._relation_call.
import weakref  # noqa: E402

_annotate([weakref.ref, weakref.proxy, weakref.getweakrefcount], PURE_REF)
WEAKREF_CALL = Annotation(relation="weakref", value_read=False)

# numpy on Python numbers (np.sqrt(d), np.prod(shape), np.array of numbers, np.float64(x))
# and on arrays from outside guarded by value (guards.snapshot): pure. On larger arrays from
# outside (whose contents no guard checks) or on tensors, capture stops
# (monitor.before_call); np.random is impure.
NUMPY = Annotation(numbers_only=True)


def _numpy_callable(fn):
    mod = getattr(fn, "__module__", None)
    if not isinstance(mod, str):
        owner = getattr(fn, "__self__", None) or getattr(fn, "__objclass__", None)
        mod = type(owner).__module__ if owner is not None and not isinstance(owner, type) \
            else getattr(owner, "__module__", None)
    if not isinstance(mod, str) or not (mod == "numpy" or mod.startswith("numpy.")):
        return None
    if mod.startswith("numpy.random"):
        return IMPURE
    return NUMPY

# torch.autograd.Variable(t): a detached alias of t (as `t.data`), see monitor.
_annotate([torch.autograd.Variable], Annotation(relation="variable", value_read=False))
# nn.Parameter(data) (modules built inside forward): an alias of data, as Variable.
_annotate([torch._C.TensorBase._make_subclass],
          Annotation(relation="make_subclass", value_read=False))
