"""The per-op front end: one ATen call -> a compiled kernel for a target.

trace (trace.py) -> refuse what must not become a kernel -> build (inductor_wrapper.py).
The target (eagerc/targets.py) says what the call looks like to the code generator (CPU
stand-ins for a host-memory device's tensors) and where outputs are allocated.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import torch

from eagerc.artifact import Artifact
from eagerc.aten_meta import qualified_name
from eagerc.refusals import (ON_DISK, CompileError, InductorFailed, NeedsHostAliases, SpecializeValues,
                             error_summary)
from eagerc.compile import known_wrong
from eagerc.compile.inductor_wrapper import build_artifact
from eagerc.compile.lock import compile_lock
from eagerc.compile.trace import trace_op

log = logging.getLogger("eagerc")

class NoLowering(CompileError):
    """The artifact would only call the op itself (Inductor keeps it as an ATen call)."""


def describe_call(op, args, layout) -> str:
    """e.g. 'aten::add.Tensor(float32[s,s] C, float32[s,s] C, alpha=float)'."""
    lifted = {s.arg for s in layout if s.kind != "tensor"}
    parts = []
    for i, (arg, value) in enumerate(zip(op._schema.arguments, args)):
        if isinstance(value, torch.Tensor):
            parts.append(_describe_tensor(value))
        elif isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            parts.append("[" + ", ".join("None" if v is None else _describe_tensor(v) for v in value) + "]")
        elif i in lifted:
            parts.append(f"{arg.name}={type(value).__name__}")
        else:
            parts.append(f"{arg.name}={value!r}")
    return f"{qualified_name(op)}(" + ", ".join(parts) + ")"


def _describe_tensor(t: torch.Tensor) -> str:
    dims = ",".join(str(s) if s in (0, 1) else "s" for s in t.shape)
    layout = "C" if t.is_contiguous() else "nc"
    return f"{str(t.dtype).replace('torch.', '')}[{dims}] {layout}"


def compile_op(miss) -> Artifact:
    """Trace and compile one call for its target: `miss` is the op miss
    (eagerc/per_op/miss.py's Miss), of which the compiler reads the op (an OpOverload),
    its arguments, its runtime layout (eagerc._C.RuntimeSlot list from the holder), its
    size class (`parallel`: large enough for a parallel kernel, else single-threaded) and
    its target.

    Raises CompileError, SpecializeValues or NeedsHostAliases. The caller has checked that
    eager accepts this call (eagerc/per_op/eager_rules.py), so a tracing failure is a
    property of the signature, not a user error.
    """
    with compile_lock:
        return _compile_op(miss)


@dataclasses.dataclass(frozen=True)
class _Build:
    """One call as the build steps read it: made once per compile."""

    op: Any
    args: tuple              # the target's stand-ins for the call's arguments
    layout: list
    parallel: bool
    target: Any
    on_device: bool          # outputs are allocated on the device (no CPU aliases)
    description: str         # describe_call's line, for logs and the artifact
    lifted_scalars: bool     # some scalar is a runtime input (SpecializeValues on failure)
    start: float             # perf_counter() at the compile's start
    eager_layouts: tuple | None = None  # eager's outputs' sizes and strides (the kernel's)


def _compile_op(miss) -> Artifact:
    op, target, layout = miss.op, miss.target, miss.layout
    wrong = known_wrong.reason(op, miss.args)
    if wrong:
        raise CompileError(wrong)
    args = target.standins(miss.args)
    # A call that still has device tensors (not one moved to CPU aliases) gets its outputs
    # allocated on the device.
    build = _Build(op, args, layout, miss.parallel, target, target.touches_device(miss.args),
                   describe_call(op, args, layout), any(s.kind != "tensor" for s in layout),
                   time.perf_counter(), miss.verdict.output_layouts)
    try:
        return _trace_and_build(build, decompose=())
    except NoLowering:
        if op not in torch._decomp.decomposition_table:
            raise
    # torch._decomp has a decomposition Inductor does not use (it prefers calling ATen's
    # kernel, e.g. upsample_bilinear2d): with it the op becomes generated code.
    return _trace_and_build(build, decompose=(op,))


# Graph ops whose Inductor lowering checks indices inside the kernel (indirect indexing).
_INDEXING_WORDS = ("index", "gather", "scatter", "take", "put", "embedding", "nll_loss",
                   "unpool", "one_hot", "bucketize", "searchsorted", "histc", "bincount")


def _checks_indices(gm) -> bool:
    """Whether the graph reads or writes through tensor-valued indices (checked ones:
    _unsafe_index, which Inductor's upsampling decomposes into, checks nothing)."""
    names = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    return any(w in name and "_unsafe" not in name for name in names for w in _INDEXING_WORDS)


def _unlowered(gm) -> set:
    """The graph's ops that torch._decomp can decompose but that Inductor neither lowers
    nor decomposes itself: Inductor would make a fallback to ATen's kernel for them on the
    fly, and with CI set in the environment it asserts instead (a decomposition exists)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.lowering import lowerings

    inductor_decomps = select_decomp_table()
    return {n.target for n in gm.graph.nodes
            if n.op == "call_function" and n.target in torch._decomp.decomposition_table
            and n.target not in lowerings and n.target not in inductor_decomps}


def _trace(build: _Build, decompose: tuple):
    """The traced call, with torch._decomp's decomposition for `decompose` and for every
    op of the graph that Inductor has no lowering for, and the target's own."""
    try:
        for _ in range(3):  # a decomposition may bring in another such op
            traced = trace_op(build.op, build.args, build.layout, decompose=decompose,
                              own=build.target.decompositions(), eager_layouts=build.eager_layouts)
            missing = _unlowered(traced.gm) - set(decompose)
            if not missing:
                break
            decompose = (*decompose, *sorted(missing, key=str))
        return traced
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - any tracing failure is a reason to fall back
        if build.lifted_scalars:
            raise SpecializeValues(str(e), ON_DISK) from e
        raise CompileError(f"tracing failed: {error_summary(e)}") from e


def _trace_and_build(build: _Build, decompose: tuple) -> Artifact:
    traced = _trace(build, decompose)
    op, target, on_device = build.op, build.target, build.on_device
    op_qualname = op._schema.name
    calls_itself = (f'aoti_torch_call_dispatcher("{op_qualname}", "{op._schema.overload_name}"',
                    f'findSchemaOrThrow("{op_qualname}", "{op._schema.overload_name}")')

    def check_code(code):
        if any(call in code for call in calls_itself):
            # No lowering: the "kernel" would only call this op again, slower.
            raise NoLowering("Inductor has no lowering for this op (it would call the op itself)")
        if on_device and target.codegen.needs_home_aliases(code):
            raise NeedsHostAliases(op_qualname)
        return target.allocate_outputs(code) if on_device else code

    # Outputs keep eager's strides: Inductor's layout optimization would hand back a
    # convolution's output channels-last where eager's is contiguous. Some ops compile
    # under settings of their own, which their code generator says (its op_patches).
    patches = {"layout_optimization": False, **target.codegen.op_patches(op_qualname, build.args)}
    if not build.parallel or _checks_indices(traced.gm):
        # Small calls: no OpenMP fork. Indexing: a failed bounds check throws, and an
        # exception leaving an OpenMP region terminates the process (index_select of
        # 40000 rows with one bad index did); out of a serial loop it reaches the holder,
        # which has eager's kernel raise eager's error (csrc/kernel_holder.cpp).
        patches["cpp.threads"] = 1
    else:
        # A parallel kernel sizes its per-thread reduction buffers by the thread count it
        # was compiled under, while its `omp parallel` takes the caller's: a kernel compiled
        # with 2 threads and run under torch.set_num_threads(4), or loaded on a machine
        # with more cores, wrote past them (a crash). Sized at run time instead.
        from torch._inductor import config as inductor_config

        if hasattr(inductor_config.cpp, "dynamic_threads"):
            patches["cpp.dynamic_threads"] = True
    try:
        built = build_artifact(traced, target.codegen, check_code, patches)
    except InductorFailed as e:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("eagerc: Inductor failed on %s (runtime inputs %s):\n%s", build.description,
                      [s.kind for s in build.layout], traced.gm.print_readable(print_output=False))
        if build.lifted_scalars:
            # Some Inductor paths (extern kernels such as addmm's beta/alpha) cannot
            # take symbolic scalars; the op then compiles one kernel per value.
            raise SpecializeValues(str(e.__cause__)) from e
        raise
    return dataclasses.replace(built, description=build.description,
                               seconds=time.perf_counter() - build.start)
