"""Traced graph -> Inductor's C++ wrapper + eagerc's entry points -> library bytes.

The one module that reaches into Inductor's internals (``compile_fx_inner`` in cpp_wrapper
mode and ``CppWrapperCodeCache.load_pybinding``, whose source it rewrites): re-check it for
each torch release eagerc supports (2.11 to 2.14).

Why Inductor's JIT C++ wrapper and not AOTInductor: its generic model-container wrapper
costs ~6 s to compile per op and ~3.4 us per call; the JIT C++ wrapper compiles in about
one second here and is a plain function taking tensor handles, which the C++ holder calls
directly. eagerc appends two C entry points to it before it is compiled:

- ``eagerc_entry(AtenTensorHandle* in, AtenTensorHandle* out)`` calls Inductor's
  ``inductor_entry_impl`` (Inductor's GIL release is removed: the holder calls it without
  the GIL held);
- ``eagerc_guard(const int64_t* ints, const double* floats)``: see guard_source.py.

What differs between kinds of generated code (host C++, Triton kernels launched from the
wrapper) is the code generator object's (eagerc/codegen/): Inductor settings, the ordered
rewrites of the wrapper, the build path. This module runs the steps they share.
"""
from __future__ import annotations

import contextlib
import logging

from eagerc.artifact import Artifact
from eagerc.refusals import (IN_PROCESS, ON_DISK, CompileError, InductorFailed,
                            NeedsHostAliases, causes, environment_failure, error_summary)
from eagerc.compile.guard_source import guard_source, range_checks
from eagerc.compile.lock import compile_lock
from eagerc.compile.output_strides import eager_output_strides

_ENTRY = """
extern "C" void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  inductor_entry_impl(inputs, outputs);
}
"""
_GIL_RELEASE = "py::gil_scoped_release_simple release;"


def _graph_input_names(gm) -> set:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {n.name for n in placeholders} | {str(n.target) for n in placeholders}


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


def _refusal(e: BaseException):
    """What our own source hook raised, unwrapped from Inductor's exception chain (its
    explicit causes: not an exception a retry was raised while handling)."""
    return next((c for c in causes(e, implicit=False)
                 if isinstance(c, (CompileError, NeedsHostAliases))), None)


class _ProxyExecutorNotice(logging.Filter):
    """Drops Inductor's "<op> is missing a c-shim implementation, using proxy executor as
    fallback": a note for Inductor's developers; the extern call it announces is in the
    kernel either way."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "missing a c-shim implementation" not in str(record.msg)


@contextlib.contextmanager
def _quiet_proxy_executor():
    """That one warning filtered from Inductor's ir logger while eagerc compiles."""
    logger, notice = logging.getLogger("torch._inductor.ir"), _ProxyExecutorNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def build_artifact(traced, codegen, check_code=None, patches=None) -> Artifact:
    """Compile `traced` with Inductor's C++ wrapper into an artifact of `codegen`'s kind
    (a code generator object, eagerc/codegen/: its Inductor settings, its rewrites of the
    wrapper, its build path).

    `check_code(code) -> code`, if given, sees the generated wrapper first (it may refuse it
    by raising, or rewrite it, e.g. a target's output allocation). The guard holds
    `traced.checks` and every assumption the ShapeEnv recorded while tracing and compiling.
    Raises CompileError / NeedsHostAliases for what the hooks refused, InductorFailed else.
    """
    import torch._inductor.config as inductor_config
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx_inner

    captured = {}
    shape_env = traced.shape_env
    inputs = _graph_input_names(traced.gm)

    def on_source(kw):
        code = kw["main_code"]
        if "gil_scoped_acquire" in code or "PyObject_Call" in code:
            raise CompileError("the generated kernel calls back into Python")
        code = codegen.rewrite_generated(code)
        if check_code is not None:
            code = check_code(code)
        checks = (traced.checks + [g.expr for g in shape_env.guards]
                  + range_checks(shape_env, traced.bindings))
        guard = guard_source(traced.bindings, checks)
        code = codegen.rewrite_for_entry(code, inputs)
        kw["main_code"] = code.replace(_GIL_RELEASE, "") + _ENTRY + guard
        captured["guard"] = guard
        captured["num_outputs"] = kw.get("num_outputs", traced.num_outputs)

    codegen.prepare(traced)
    patches = {"fx_graph_cache": False, "freezing": False,
               **codegen.inductor_patches(inductor_config), **(patches or {})}

    def compile_cpp_wrapper():
        with tracing(TracingContext(traced.fake_mode)), _intercept_wrapper_source(on_source), \
                codegen.build_path(), _quiet_proxy_executor(), eager_output_strides():
            compile_fx_inner(traced.gm, traced.fakes, cpp_wrapper=True, is_inference=True)

    try:
        with compile_lock, inductor_config.patch(patches):
            try:
                compile_cpp_wrapper()
            except Exception as e:  # noqa: BLE001
                if not codegen.retry_after(e, traced, patches):
                    raise
                compile_cpp_wrapper()
    except (CompileError, NeedsHostAliases):
        raise
    except Exception as e:  # noqa: BLE001 - Inductor wraps what our hook raised
        refusal = _refusal(e)
        if isinstance(refusal, NeedsHostAliases):
            raise refusal from e
        if isinstance(refusal, CompileError):
            raise type(refusal)(str(refusal)) from e  # its kind too (NoLowering)
        # A compiler that could not run (disk full, killed, out of memory) says nothing
        # about the graph: this process runs the call natively, the next one tries again.
        raise InductorFailed(f"Inductor failed: {error_summary(e)}",
                             IN_PROCESS if environment_failure(e) else ON_DISK) from e
    loaded = getattr(on_source, "loaded", None)
    if loaded is None or "guard" not in captured:
        raise CompileError("Inductor produced no C++ wrapper for this graph")
    path = getattr(getattr(loaded, "__self__", None), "__file__", None)
    if path is None:
        raise CompileError("cannot locate the compiled wrapper library")
    with open(path, "rb") as f:
        library = f.read()
    return Artifact(library, {"num_outputs": int(captured["num_outputs"]), "guard": captured["guard"]})
