"""Compile one ATen call into an artifact C++ can run without Python.

op + call arguments -> FX graph with symbolic sizes and lifted scalars (make_fx over fake
tensors) -> TorchInductor in cpp_wrapper mode for the target -> a shared library with
``eagerc_entry`` (Inductor's generated wrapper: allocates outputs, calls the kernels) and
``eagerc_guard`` (the tracing assumptions, see _guards.py).

Why not AOTInductor: its generic model-container wrapper costs ~6 s to compile per op
and ~3.4 us per call; Inductor's JIT C++ wrapper compiles in about one second here and
is a plain function taking tensor handles, which the C++ holder calls directly.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import time

import torch

from eagerc._arg_kinds import ArgKind, classify, is_lifted_scalar, is_parallel, walk_runtime_inputs
from eagerc._guards import GuardError, guard_source


class CompileError(Exception):
    """The call cannot be compiled; the message says why (it becomes a fallback reason)."""


def error_summary(e: BaseException) -> str:
    """'Type: first line of the message' (at most 200 characters), for reasons and logs."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"


class SpecializeValues(Exception):
    """Tracing failed with lifted scalars; retry with scalar values in the key."""


class NeedsCpuAliases(Exception):
    """The kernel calls ATen CPU functions directly (extern kernels such as mm or
    convolution through the C shim), which take CPU tensors only: on the eagerc
    device this op must run on zero-copy CPU aliases of its tensors."""


@dataclasses.dataclass
class CompiledKernel:
    library: bytes           # the shared library
    num_outputs: int
    guard_source: str
    description: str         # human-readable signature, for logs and reports
    seconds: float


_compile_lock = threading.Lock()  # Inductor's global state is not thread-safe


def describe_call(op, args, specialize: bool) -> str:
    """e.g. 'aten::add.Tensor(f32[s,s] C, f32[s,s] C, alpha=float)'."""
    parts = []
    for arg, value in zip(op._schema.arguments, args):
        kind = classify(arg)
        if isinstance(value, torch.Tensor):
            parts.append(_describe_tensor(value))
        elif kind in (ArgKind.TENSOR_LIST, ArgKind.OPTIONAL_TENSOR_LIST):
            parts.append("[" + ", ".join("None" if v is None else _describe_tensor(v) for v in value) + "]")
        elif kind in (ArgKind.SCALAR, ArgKind.FLOAT, ArgKind.OPTIONAL_SCALAR, ArgKind.OPTIONAL_FLOAT) \
                and is_lifted_scalar(value, specialize):
            parts.append(f"{arg.name}={type(value).__name__}")
        else:
            parts.append(f"{arg.name}={value!r}")
    return f"aten::{op._schema.name.split('::')[-1]}" + (
        f".{op._overloadname}" if op._overloadname != "default" else "") + "(" + ", ".join(parts) + ")"


def _describe_tensor(t: torch.Tensor) -> str:
    dims = ",".join(str(s) if s in (0, 1) else "s" for s in t.shape)
    layout = "C" if t.is_contiguous() else "nc"
    return f"{str(t.dtype).replace('torch.', '')}[{dims}] {layout}"


def _fake_inputs(op, args, specialize):
    """Fake tensors with symbolic sizes and SymInt/SymFloat scalars for the runtime
    inputs; returns (fake_mode, shape_env, paths, fakes, slots, bindings, checks)."""
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    # No duck sizing: two sizes that happen to be equal at the first call stay
    # separate symbols, so the kernel is not specialized to that coincidence.
    shape_env = ShapeEnv(duck_shape=False, allow_scalar_outputs=True)
    fake_mode = FakeTensorMode(shape_env=shape_env)
    paths, fakes = [], []
    slots = []  # per runtime input: ("t", fake, first int index) or ("i"/"f", sym, index)
    n_ints = n_floats = 0
    for k, (path, value) in enumerate(walk_runtime_inputs(op._schema, args, specialize)):
        source = LocalSource(f"input{k}")
        if isinstance(value, torch.Tensor):
            fake = fake_input(fake_mode, value, range(value.dim()), source)
            slots.append(("t", fake, n_ints))
            n_ints += 2 * value.dim() + 1
        elif isinstance(value, int):
            sym = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
            fake = shape_env.create_symintnode(sym, hint=value, source=source)
            slots.append(("i", fake, n_ints))
            n_ints += 1
        else:
            # A float scalar enters as a 0-dim float64 tensor read with .item() inside
            # the graph: Inductor's C++ wrapper cannot take SymFloat inputs directly.
            fake = fake_mode.from_tensor(torch.tensor(float(value), dtype=torch.float64))
            slots.append(("f", fake, n_floats))
            n_floats += 1
        paths.append(path)
        fakes.append(fake)
    # Read the symbols now: once tracing proves two of them equal, the fakes report
    # the replacement, and the guard must still bind every original symbol.
    bindings, checks = _bindings_and_checks(slots)
    return fake_mode, shape_env, paths, fakes, slots, bindings, checks


def _bindings_and_checks(slots):
    """Bind each symbol to the first array slot holding it; every other size, stride
    and offset must equal its symbolic expression (checked by the guard)."""
    import sympy

    bindings, checks = {}, []

    def visit(idx, value, arr="i"):
        expr = value.node.expr if isinstance(value, (torch.SymInt, torch.SymFloat)) else value
        if isinstance(expr, sympy.Symbol) and expr.name not in bindings:
            bindings[expr.name] = (arr, idx)
        elif arr == "i":
            checks.append((idx, sympy.sympify(expr)))

    for kind, fake, idx in slots:
        if kind == "t":
            values = list(fake.shape) + list(fake.stride()) + [fake.storage_offset()]
            for j, v in enumerate(values):
                visit(idx + j, v)
        elif kind == "i":
            visit(idx, fake)
    return bindings, checks


def _rebuild_call(op, args, paths, values):
    """The op's args and kwargs with runtime inputs replaced by `values`."""
    full = [list(a) if isinstance(a, (list, tuple)) else a for a in args]
    for path, v in zip(paths, values):
        if len(path) == 1:
            full[path[0]] = v
        else:
            full[path[0]][path[1]] = v
    pos, kw = [], {}
    for arg, v in zip(op._schema.arguments, full):
        if arg.kwarg_only:
            kw[arg.name] = v
        else:
            pos.append(v)
    return pos, kw


def _has_lifted_scalars(op, args, specialize) -> bool:
    return any(not isinstance(v, torch.Tensor) for _, v in walk_runtime_inputs(op._schema, args, specialize))


def _returns_plan(op):
    """Indices of returns that are new tensors (the graph's outputs); the others
    alias a mutated argument and are returned by the holder as that argument."""
    fresh = []
    for i, ret in enumerate(op._schema.returns):
        if ret.alias_info is None:
            fresh.append(i)
    return fresh


def trace(op, args, specialize):
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode, shape_env, paths, fakes, slots, bindings, checks = _fake_inputs(op, args, specialize)
    fresh = _returns_plan(op)
    mutates = any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)
    returns_list = len(op._schema.returns) == 1 and isinstance(op._schema.returns[0].type, torch._C.ListType)

    float_slots = [k for k, (kind, _, _) in enumerate(slots) if kind == "f"]

    def call(*values):
        values = list(values)
        for k in float_slots:
            values[k] = values[k].item()
        pos, kw = _rebuild_call(op, args, paths, values)
        out = op(*pos, **kw)
        if returns_list:
            return tuple(out)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(outs[i] for i in fresh)

    fn = call
    if mutates:
        # Functionalize: the op becomes its functional form plus copy_ into the
        # mutated inputs, which Inductor fuses into one kernel writing in place.
        fn = torch.func.functionalize(call, remove="mutations_and_views")
    from torch._dispatch.python import enable_python_dispatcher

    # The Python dispatcher lets meta functions with symbolic sizes (expand in
    # addcmul's broadcasting) take their SymInt-aware Python paths.
    with fake_mode, enable_python_dispatcher():
        gm = make_fx(fn, decomposition_table=select_decomp_table(), tracing_mode="real")(*fakes)
        if op._schema.name and torch.Tag.nondeterministic_seeded in op.tags:
            seed_random_ops(gm, fake_mode)
    outputs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    for out in outputs:
        val = out.meta.get("val") if hasattr(out, "meta") else None
        if isinstance(val, torch.Tensor) and (val.layout != torch.strided or val.is_quantized):
            raise CompileError(f"output layout {val.layout} is not strided")
    return gm, fake_mode, shape_env, fakes, slots, (bindings, checks), len(outputs)


def seed_random_ops(gm, fake_mode) -> None:
    """Random ops lower only after Inductor's seed pass (compile_fx runs it for whole
    graphs; compile_fx_inner, which eagerc calls, does not)."""
    from torch._inductor.fx_passes.replace_random import replace_random_passes
    from torch._inductor.virtualized import V

    with V.set_fake_mode(fake_mode):
        replace_random_passes(gm)


def fake_input(fake_mode, t, dynamic_dims, source):
    """A fake of tensor `t` whose dims in `dynamic_dims` are fresh size symbols (strides
    inferred from them), the others static."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    ctx = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if d in dynamic_dims else DimDynamic.STATIC
                       for d in range(t.dim())],
        dynamic_strides=[DimDynamic.INFER_STRIDE] * t.dim())
    return fake_mode.from_tensor(t, symbolic_context=ctx, source=source)


@contextlib.contextmanager
def _intercept_wrapper_source(on_source):
    """Inductor hands the generated C++ wrapper to CppWrapperCodeCache.load_pybinding;
    `on_source(kwargs)` may rewrite it (add entry points, drop the GIL release) before
    it is compiled, and receives the loaded module's path afterwards."""
    from torch._inductor.codecache import CppWrapperCodeCache

    original = CppWrapperCodeCache.load_pybinding  # bound to the class (classmethod)

    def load_pybinding(cls, *a, **kw):
        on_source(kw)
        fn = original(*a, **kw)
        on_source.loaded = fn
        return fn

    CppWrapperCodeCache.load_pybinding = classmethod(load_pybinding)
    try:
        yield
    finally:
        del CppWrapperCodeCache.load_pybinding  # the inherited classmethod shows through again


# Lifted scalars arrive as 0-dim int64/float64 host tensors (csrc/artifact.cpp); reading
# them through the data pointer skips the dispatcher call inside aoti_torch_item_*.
_SCALAR_READS = """
static inline AOTITorchError eagerc_item_int64(AtenTensorHandle t, int64_t* out) {
  void* p = nullptr; AOTITorchError e = aoti_torch_get_data_ptr(t, &p);
  if (e == AOTI_TORCH_SUCCESS) *out = *static_cast<const int64_t*>(p);
  return e;
}
static inline AOTITorchError eagerc_item_float64(AtenTensorHandle t, double* out) {
  void* p = nullptr; AOTITorchError e = aoti_torch_get_data_ptr(t, &p);
  if (e == AOTI_TORCH_SUCCESS) *out = *static_cast<const double*>(p);
  return e;
}
"""


def _direct_scalar_reads(code: str) -> str:
    if "aoti_torch_item_int64(" not in code and "aoti_torch_item_float64(" not in code:
        return code
    first_line_end = code.index("\n") + 1  # after the cpp_wrapper header include
    body = code[first_line_end:].replace("aoti_torch_item_int64(", "eagerc_item_int64(")
    body = body.replace("aoti_torch_item_float64(", "eagerc_item_float64(")
    return code[:first_line_end] + _SCALAR_READS + body


_ENTRY = """
extern "C" void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  inductor_entry_impl(inputs, outputs);
}
"""
_GIL_RELEASE = "py::gil_scoped_release_simple release;"


def _cpu_standin(value):
    """A CPU tensor with the metadata of `value` (tracing reads nothing else)."""
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        extent = value.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(value.shape, value.stride()))
        base = torch.empty(max(extent, 1), dtype=value.dtype)
        return base.as_strided(value.shape, value.stride(), value.storage_offset())
    if isinstance(value, torch.device) and value.type != "cpu":
        return torch.device("cpu")
    if isinstance(value, (list, tuple)):
        return type(value)(_cpu_standin(v) for v in value)
    return value


def for_target(args, dispatch_key: str):
    """The call as the codegen target sees it. The eagerc device keeps its memory on
    the host, so its target is the CPU: kernels are generated from CPU stand-ins and
    allocate their outputs on the device (see _allocate_on_device)."""
    if dispatch_key == "CPU":
        return args
    return tuple(_cpu_standin(a) for a in args)


def _touches_device(args) -> bool:
    for a in args:
        items = a if isinstance(a, (list, tuple)) else (a,)
        for v in items:
            if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                return True
            if isinstance(v, torch.device) and v.type != "cpu":
                return True
    return False


# ATen CPU functions called through the C shim (allocation helpers excepted).
_CPU_SHIM_CALL = re.compile(r"aoti_torch_cpu_\w+\(")


def _allocate_on_device(code: str, dispatch_key: str) -> str:
    # Inductor's C++ wrapper allocates outputs and temporaries through
    # aoti_torch_empty_strided(..., cached_torch_device_type_cpu, ...): point those at
    # the device, whose memory the CPU kernels address directly.
    if dispatch_key == "CPU":
        return code
    if dispatch_key != "PrivateUse1":
        raise CompileError(f"no codegen target for dispatch key {dispatch_key}")
    return (code.replace("CACHE_TORCH_DEVICE(cpu)", "CACHE_TORCH_DEVICE(privateuse1)")
                .replace("cached_torch_device_type_cpu", "cached_torch_device_type_privateuse1"))


def compile_call(op, args, specialize: bool, dispatch_key: str = "CPU") -> CompiledKernel:
    """Traces and compiles one call of `op` (an OpOverload) for the CPU target;
    outputs are allocated on the device that `dispatch_key` serves."""
    # A call that still has device tensors or a device argument (not one moved to CPU
    # aliases) gets its outputs allocated on the device.
    on_device = dispatch_key != "CPU" and _touches_device(args)
    args = for_target(args, dispatch_key)
    start = time.perf_counter()
    description = describe_call(op, args, specialize)
    op_qualname = op._schema.name
    try:
        gm, fake_mode, shape_env, fakes, slots, (bindings, input_checks), n_out = trace(op, args, specialize)
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - any tracing failure is a reason to fall back
        if _has_lifted_scalars(op, args, specialize):
            raise SpecializeValues(str(e)) from e
        raise CompileError(f"tracing failed: {error_summary(e)}") from e

    def check_code(code):
        if f'aoti_torch_call_dispatcher("{op_qualname}"' in code:
            # No lowering: the "kernel" would only call this op again, slower.
            raise CompileError("Inductor has no lowering for this op (it would call the op itself)")
        if on_device and _CPU_SHIM_CALL.search(code):
            raise NeedsCpuAliases(op_qualname)
        return _allocate_on_device(code, dispatch_key) if on_device else code

    runtime_inputs = list(walk_runtime_inputs(op._schema, args, specialize))
    patches = {} if is_parallel(runtime_inputs) else {"cpp.threads": 1}  # small calls: no OpenMP fork
    try:
        library, num_outputs, guard = compile_traced(
            gm, fake_mode, shape_env, fakes, bindings, input_checks, n_out, check_code, patches)
    except InductorFailed as e:
        if _has_lifted_scalars(op, args, specialize):
            # Some Inductor paths (extern kernels such as addmm's beta/alpha) cannot
            # take symbolic scalars; the op then compiles one kernel per value.
            raise SpecializeValues(str(e.__cause__)) from e
        raise CompileError(str(e)) from e
    return CompiledKernel(
        library=library,
        num_outputs=num_outputs,
        guard_source=guard,
        description=description,
        seconds=time.perf_counter() - start,
    )


def _range_checks(shape_env, bindings):
    """The value ranges the ShapeEnv assumed for bound symbols (a symbolic size is >= 2:
    sizes 0 and 1 are specialized), as guard terms."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    unbounded = (int_oo, -int_oo, sympy.oo, -sympy.oo)
    checks = []
    for sym, vr in shape_env.var_to_range.items():
        if sym.name not in bindings:
            continue
        if vr.lower not in unbounded:
            checks.append(sympy.Ge(sym, vr.lower))
        if vr.upper not in unbounded:
            checks.append(sympy.Le(sym, vr.upper))
    return checks


class InductorFailed(CompileError):
    """Inductor itself failed on a traced graph (the cause is chained)."""


def compile_traced(gm, fake_mode, shape_env, fakes, bindings, input_checks, n_out,
                   check_code=None, patches=None):
    """Compile a graph traced over `fakes` with Inductor's C++ wrapper into an artifact.

    `check_code(code) -> code`, if given, sees the generated wrapper first (it may refuse it by raising,
    or rewrite it). Returns (library bytes, number of outputs, guard source); the guard holds
    `input_checks` and every assumption the ShapeEnv recorded while tracing and compiling.
    Raises CompileError (or NeedsCpuAliases) for what the hooks refused, InductorFailed else.
    """
    import torch._inductor.config as inductor_config
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx_inner

    captured = {}

    def on_source(kw):
        code = kw["main_code"]
        if "gil_scoped_acquire" in code or "PyObject_Call" in code:
            raise CompileError("the generated kernel calls back into Python")
        if check_code is not None:
            code = check_code(code)
        checks = input_checks + [g.expr for g in shape_env.guards] + _range_checks(shape_env, bindings)
        guard = guard_source(bindings, checks)
        # The holder calls the entry without the GIL held: drop Inductor's release.
        code = _direct_scalar_reads(code)
        kw["main_code"] = code.replace(_GIL_RELEASE, "") + _ENTRY + guard
        captured["guard"] = guard
        captured["num_outputs"] = kw.get("num_outputs", n_out)

    patches = {"fx_graph_cache": False, "freezing": False, **(patches or {})}
    try:
        with _compile_lock, inductor_config.patch(patches), tracing(TracingContext(fake_mode)), \
                _intercept_wrapper_source(on_source):
            compile_fx_inner(gm, fakes, cpp_wrapper=True, is_inference=True)
    except (CompileError, NeedsCpuAliases):
        raise
    except GuardError as e:
        raise CompileError(str(e)) from e
    except Exception as e:  # noqa: BLE001
        cause = e
        while not isinstance(cause, (CompileError, GuardError, NeedsCpuAliases)):
            # Inductor wraps what our source hook raised (InductorError.inner_exception).
            inner = getattr(cause, "inner_exception", None) or cause.__cause__
            if inner is None:
                break
            cause = inner
        if isinstance(cause, NeedsCpuAliases):
            raise cause from e
        if isinstance(cause, (CompileError, GuardError)):
            raise CompileError(str(cause)) from e
        raise InductorFailed(f"Inductor failed: {error_summary(e)}") from e
    loaded = getattr(on_source, "loaded", None)
    if loaded is None or "guard" not in captured:
        raise CompileError("Inductor produced no C++ wrapper for this graph")
    path = getattr(getattr(loaded, "__self__", None), "__file__", None)
    if path is None:
        raise CompileError("cannot locate the compiled wrapper library")
    with open(path, "rb") as f:
        library = f.read()
    return library, int(captured["num_outputs"]), captured["guard"]
