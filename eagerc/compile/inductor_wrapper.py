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
- ``eagerc_guard(const int64_t* ints, const double* floats)``: see guards.py.

On CUDA the wrapper also launches Triton kernels. Inductor's JIT wrapper loads each
kernel's cubin by file path from its temporary cache directory; eagerc embeds the cubins
in the library instead (``.incbin`` while the file still exists) and loads them from
memory, so an artifact is one self-contained file. Kernels launch on the current stream
of the device the graph was compiled for (the device index is in every signature).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from concurrent.futures import ThreadPoolExecutor

import torch

from eagerc.compile.errors import (IN_PROCESS, ON_DISK, CompileError, InductorFailed,
                                   NeedsHostAliases, environment_failure, error_summary)
from eagerc.compile.boxed_int_lists import fix_boxed_int_lists
from eagerc.compile.direct_alloc import direct_allocations
from eagerc.compile.output_asserts import cheap_output_asserts
from eagerc.compile.gpu_context import make_context_current
from eagerc.compile import glue_prelude, plan_build
from eagerc.compile.gpu_launch_types import fix_float_launch_params
from eagerc.compile.guards import guard_source, range_checks
from eagerc.compile.lock import compile_lock
from eagerc.compile.scratch_buffers import scratch_buffers
from eagerc.compile.wrapper_source import after_header, redirect_calls

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

_ENTRY = """
extern "C" void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  inductor_entry_impl(inputs, outputs);
}
"""
_GIL_RELEASE = "py::gil_scoped_release_simple release;"


# What Inductor's GPU wrapper emits to load one kernel from its cubin file (JIT mode).
_LOAD_KERNEL_FROM_FILE = re.compile(
    r'loadKernel\(\s*"(?P<path>[^"]+)"\s*,\s*(?P<name>"[^"]+")\s*,\s*(?P<shm>[^,()]+?)\s*,\s*cubin_dir_\s*\)')

# Inductor settings for GPU graphs: kernels compiled and tuned while the graph compiles,
# their cubins kept for the C++ wrapper, no CUDA graphs (the holder launches per call).
# (torch 2.11's JIT C++ wrapper breaks with autotune_at_compile_time=False: its first,
# Python pass is generated under cpp_wrapper=True and does not parse.)
_GPU_PATCHES = {"triton.store_cubin": True, "triton.cudagraphs": False,
                "triton.autotune_at_compile_time": True}

# How a CPU graph is built (part of the cache key: settings.BUILD_RECIPE). Measured on
# torch 2.13, 2 cores: the default, one translation unit (wrapper + kernels + Python
# binding) at -O3, cost ~1.6 s of g++ (the precompiled header covers the wrapper's headers
# only, so the kernels' vector headers, cpp_prefix.h, were parsed every time) and ~0.4 s
# of ld reading libtorch_cpu's 75k dynamic symbols. Instead, Inductor's "build separate"
# mode: the wrapper (glue code) at -O1, the kernels with Inductor's unchanged -O3 flags,
# each translation unit with its own precompiled header (built once per machine in
# Inductor's global header directory); eagerc runs the two compiles in parallel and links
# libtorch_cpu through an empty stub (_link_through_stub). ~0.9 s per kernel in all.
_CPU_PATCHES = {"cpp_wrapper_build_separate": True}


def _cpu_patches(config) -> dict:
    """_CPU_PATCHES this torch knows (2.11-2.14 all do; a renamed one is skipped)."""
    return {k: v for k, v in _CPU_PATCHES.items() if hasattr(config, k)}


# An input size/stride assertion of the wrapper: `assert_size_stride(arg0_1, {..}, {..}, ..);`
_ASSERT_SIZE_STRIDE = re.compile(r"^[ \t]*assert_size_stride\((\w+),[^;\n]*\);[ \t]*\n", re.M)


def _drop_input_asserts(code: str, inputs) -> str:
    """Remove the wrapper's size/stride assertions on graph inputs. eagerc_guard already
    checks every size, stride and offset of every tensor input before the holder calls
    the entry (guards.bind_symbols), so these only cost: ~0.2 s of g++ per kernel
    (assert_size_stride instantiates string and stringstream code) and a stringstream per
    call. Assertions on extern kernels' outputs (named bufN) stay."""
    return _ASSERT_SIZE_STRIDE.sub(lambda m: "" if m.group(1) in inputs else m.group(0), code)


def _graph_input_names(gm) -> set:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {n.name for n in placeholders} | {str(n.target) for n in placeholders}


@contextlib.contextmanager
def _parallel_cpp_build(gpu: bool = False):
    """While active, Inductor's build of a wrapper + kernels library (builders: wrapper
    compile, kernel compile, link; ``codecache._worker_compile_cpp``) runs both compiles
    at once (each g++ spends ~0.4 s loading its precompiled header alone; this machine
    has 2 cores) and links through _link_through_stub. With `gpu`, the GPU wrapper's one
    compile-and-link step (glue code: its kernels are Triton's) is built as _build_glue
    says. Other builds go to Inductor."""
    from torch._inductor import codecache

    original = getattr(codecache, "_worker_compile_cpp", None)
    if original is None:
        yield
        return

    def worker(lock_path, builders, *args, **kwargs):
        builders = list(builders)
        usable = not (args or kwargs) and all(
            hasattr(b, "build") and hasattr(b, "get_target_file_path") for b in builders)
        if usable and len(builders) == 1 and (gpu or _is_glue_only(builders[0])):
            from torch.utils._filelock import FileLock

            with FileLock(lock_path, timeout=getattr(codecache, "LOCK_TIMEOUT", 600)):
                if not os.path.exists(builders[0].get_target_file_path()):
                    _build_glue(builders[0])
            return None
        if not usable or len(builders) != 3:
            return original(lock_path, builders, *args, **kwargs)
        *compiles, link = builders
        from torch.utils._filelock import FileLock

        # Same lock and skip-if-built rule as Inductor's worker.
        with FileLock(lock_path, timeout=getattr(codecache, "LOCK_TIMEOUT", 600)):
            todo = [b for b in compiles if not os.path.exists(b.get_target_file_path())]
            if todo:
                with ThreadPoolExecutor(len(todo)) as pool:
                    for done in [pool.submit(_compile_unit, b) for b in todo]:
                        done.result()  # re-raises a compile error
            if not os.path.exists(link.get_target_file_path()):
                _link_through_stub(link)

    codecache._worker_compile_cpp = worker
    try:
        yield
    finally:
        codecache._worker_compile_cpp = original


def _compile_unit(builder) -> None:
    """Compile one translation unit of a CPU build: the wrapper with eagerc's prelude where
    it can (glue_prelude), the kernels as Inductor says. -w: torch's vector headers emit
    ~130 KB of warnings per kernel compile (~0.08 s); nobody reads them (errors still print)."""
    command = getattr(builder, "get_command_line", None)
    if command is None or not glue_prelude.slim_build(builder, command() + " -w"):
        _with_flags(builder, "-w").build()


def _is_glue_only(builder) -> bool:
    """Whether a one-step CPU build compiles glue code alone (a graph of extern calls, mm
    say: no C++ kernel of its own), which _build_glue builds at -O1 as a GPU wrapper."""
    command = getattr(builder, "get_command_line", None)
    source = glue_prelude.source_file(command()) if command else None
    if source is None or not os.path.exists(source):
        return False
    with open(source) as f:
        code = f.read()
    return "cpp_fused" not in code and "cpp_wrapper/cpu.h" in code


def _with_flags(builder, flags: str):
    """`builder` with `flags` appended to its command line (unchanged where this torch's
    CppBuilder has no get_command_line)."""
    command = getattr(builder, "get_command_line", None)
    if command is not None:
        line = command()
        builder.get_command_line = lambda: f"{line} {flags}"
    return builder


_LINK_TORCH_LIBS = re.compile(r"(?<!\S)-l(?P<lib>torch_cpu|torch_cuda)(?!\S)")
_OPTIMIZE = re.compile(r"(?<!\S)-O[23](?!\S)")
# Debug info for glue code nobody debugs: 4% of a GPU wrapper's g++ time (0.70 -> 0.67 s on
# the H100, tools/gpu_probe.py glue).
_NO_DEBUG_INFO = re.compile(r"(?<!\S)-g[0-3]?(?!\S)")
_stub_paths: dict = {}


def _build_with(builder, rewrite, prelude: bool = False) -> None:
    """Build with the command line `rewrite(line)` gives, and with `prelude` eagerc's
    wrapper header in place of Inductor's (glue_prelude); where that build fails (an old
    linker refusing the stubs, say), as given: the real build decides."""
    command = getattr(builder, "get_command_line", None)
    if command is not None:
        cheaper = rewrite(command())
        if prelude and glue_prelude.slim_build(builder, cheaper):
            return
        builder.get_command_line = lambda: cheaper
        try:
            return builder.build()
        except Exception:  # noqa: BLE001
            builder.get_command_line = command
    builder.build()


def _through_stubs(line: str) -> str:
    """`line` with ``-ltorch_cpu`` / ``-ltorch_cuda`` replaced by empty libraries of the same
    soname (forced into DT_NEEDED). The output is the same: a shared library may leave
    symbols undefined, and the loader resolves them in the libraries the process has
    loaded, as it did; but the linker no longer reads their dynamic symbol tables
    (libtorch_cpu's 75k symbols: 0.35 s -> 0.06 s). A stub that cannot be made: as given."""
    compiler = line.split()[0] if line else ""

    def stub_link(match):
        stub = _stub_library(compiler, f"lib{match.group('lib')}.so")
        return f"-Wl,--push-state,--no-as-needed {stub} -Wl,--pop-state" if stub else match.group(0)

    return _LINK_TORCH_LIBS.sub(stub_link, line)


def _build_glue(builder) -> None:
    """Compile and link a GPU wrapper (or a CPU graph of extern calls) in one step, as
    Inductor would but cheaper: eagerc's prelude header (glue_prelude), -O1 (the wrapper
    only unpacks handles and launches kernels; torch 2.13 builds it so itself), no debug
    info, -w, and libtorch linked through stubs (_through_stubs). A GPU wrapper whose
    kernels are all Triton's (or cuBLAS's mm family) is not compiled at all: its artifact
    is the plan launcher with its launch plan appended (plan_build)."""
    command = getattr(builder, "get_command_line", None)
    if command is not None and plan_build.try_build(builder, command()):
        return
    _build_with(builder, lambda line: _through_stubs(_NO_DEBUG_INFO.sub("", _OPTIMIZE.sub("-O1", line))) + " -w",
                prelude=True)


def _link_through_stub(builder) -> None:
    """Run the link step `builder` with libtorch linked through stubs (_through_stubs)."""
    _build_with(builder, _through_stubs)


def _stub_library(compiler: str, soname: str):
    """Path of this process's empty library named `soname` (made once, ~30 ms), or None."""
    if soname not in _stub_paths:
        import atexit
        import shutil
        import subprocess
        import tempfile

        try:
            path = os.path.join(tempfile.mkdtemp(prefix="eagerc-link-"), soname)
            atexit.register(shutil.rmtree, os.path.dirname(path), True)
            subprocess.run([compiler, "-shared", "-fPIC", "-x", "c++", os.devnull,
                            f"-Wl,-soname,{soname}", "-o", path],
                           check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            path = ""
        _stub_paths[soname] = path
    return _stub_paths[soname] or None


def embed_cubins(code: str) -> str:
    """Replace every ``loadKernel("<file>.cubin", name, shm, cubin_dir_)`` by a load from
    bytes linked into the library (Inductor's in-memory overload of loadKernel)."""
    blobs = []

    def from_memory(match):
        path = match.group("path")
        if '"' in path or "\\" in path or "\n" in path:
            raise CompileError(f"cannot embed a cubin with this path: {path!r}")
        symbol = f"eagerc_cubin_{len(blobs)}"
        blobs.append((symbol, path))
        return f"loadKernel({symbol}, {match.group('name')}, {match.group('shm')})"

    code = _LOAD_KERNEL_FROM_FILE.sub(from_memory, code)
    if "cubin_dir_)" in code:
        raise CompileError("the GPU wrapper loads a kernel in a form eagerc cannot embed")
    if not blobs:
        return code
    # The bytes go into .rodata while this translation unit is compiled (the cubin file
    # exists until then); hidden symbols stay private to this library.
    asm = "".join(
        f'__asm__(".section .rodata\\n.balign 64\\n.globl {sym}\\n.hidden {sym}\\n{sym}:\\n'
        f'.incbin \\"{path}\\"\\n.byte 0\\n.previous\\n");\n'
        f'extern "C" const unsigned char {sym}[];\n' for sym, path in blobs)
    first_line_end = after_header(code)
    return code[:first_line_end] + asm + code[first_line_end:]


def _is_gpu_graph(traced) -> bool:
    """Whether the graph computes on CUDA: an input there, or (a factory such as arange,
    which has no tensor input) a value it makes there. A factory taken for a CPU graph got
    CPU's device helpers in Inductor's GPU wrapper (its Python pass wrote `with pass:`)."""
    values = list(traced.fakes) + [node.meta.get("val") for node in traced.gm.graph.nodes]
    return any(isinstance(v, torch.Tensor) and v.device.type == "cuda"
               for v in torch.utils._pytree.tree_leaves(values))


def _register_cuda_op_overrides() -> None:
    """Inductor imports its per-device C++ helpers (CUDA's loadKernel, launchKernel) only
    while its table is empty; once another device (the eagerc device) registered its own,
    CUDA's must be imported by name."""
    import torch._inductor.codegen.cuda.device_op_overrides  # noqa: F401 - registers on import
    from torch._inductor.codegen.common import init_backend_registration

    init_backend_registration()


def _run_python_wrapper_once(traced, patches) -> None:
    """Compile the graph with Inductor's Python wrapper and run it once on random inputs
    of the fakes' sizes: this compiles and tunes its Triton kernels and records their
    cubins and launch parameters, which the C++ wrapper's code generation reads (torch
    versions whose JIT C++ wrapper does not do this pass itself)."""
    from torch._dynamo.utils import defake
    from torch._inductor.compile_fx import compile_fx_inner

    real = [f.node.hint if isinstance(f, torch.SymInt) else defake(f) for f in traced.fakes]
    compiled = compile_fx_inner(traced.gm, traced.fakes, is_inference=True)
    compiled(list(real))
    torch.cuda.synchronize()


@dataclasses.dataclass
class BuiltArtifact:
    library: bytes       # the shared library
    num_outputs: int
    guard_source: str


def _direct_scalar_reads(code: str) -> str:
    return redirect_calls(code, {"aoti_torch_item_int64(": "eagerc_item_int64(",
                                 "aoti_torch_item_float64(": "eagerc_item_float64("}, _SCALAR_READS)


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
    """What our own source hook raised, unwrapped from Inductor's exception chain."""
    cause = e
    while not isinstance(cause, (CompileError, NeedsHostAliases)):
        inner = getattr(cause, "inner_exception", None) or cause.__cause__
        if inner is None:
            return None
        cause = inner
    return cause


def build_artifact(traced, check_code=None, patches=None) -> BuiltArtifact:
    """Compile `traced` with Inductor's C++ wrapper into an artifact.

    `check_code(code) -> code`, if given, sees the generated wrapper first (it may refuse it
    by raising, or rewrite it, e.g. a target's output allocation). The guard holds
    `traced.checks` and every assumption the ShapeEnv recorded while tracing and compiling.
    Raises CompileError / NeedsHostAliases for what the hooks refused, InductorFailed else.
    """
    import torch._inductor.config as inductor_config
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx_inner

    from eagerc.compile import vec_isa_memo

    vec_isa_memo.install()  # every C++ compile (CPU kernels, GPU wrappers) checks the CPU ISA
    captured = {}
    shape_env = traced.shape_env

    def on_source(kw):
        code = kw["main_code"]
        if "gil_scoped_acquire" in code or "PyObject_Call" in code:
            raise CompileError("the generated kernel calls back into Python")
        if not gpu:
            code = scratch_buffers(code)
        if check_code is not None:
            code = check_code(code)
        checks = (traced.checks + [g.expr for g in shape_env.guards]
                  + range_checks(shape_env, traced.bindings))
        guard = guard_source(traced.bindings, checks)
        code = fix_boxed_int_lists(_direct_scalar_reads(embed_cubins(code)))
        if gpu:
            code = make_context_current(fix_float_launch_params(code))
        else:
            code = _drop_input_asserts(code, inputs)
        code = cheap_output_asserts(direct_allocations(code))
        kw["main_code"] = code.replace(_GIL_RELEASE, "") + _ENTRY + guard
        captured["guard"] = guard
        captured["num_outputs"] = kw.get("num_outputs", traced.num_outputs)

    gpu = _is_gpu_graph(traced)
    inputs = _graph_input_names(traced.gm)
    if gpu:
        _register_cuda_op_overrides()
    patches = {"fx_graph_cache": False, "freezing": False,
               **(_GPU_PATCHES if gpu else _cpu_patches(inductor_config)), **(patches or {})}

    def compile_cpp_wrapper():
        with tracing(TracingContext(traced.fake_mode)), _intercept_wrapper_source(on_source), \
                glue_prelude.minimal_python_binding(), _parallel_cpp_build(gpu=gpu):
            compile_fx_inner(traced.gm, traced.fakes, cpp_wrapper=True, is_inference=True)

    try:
        with compile_lock, inductor_config.patch(patches):
            try:
                compile_cpp_wrapper()
            except Exception as e:  # noqa: BLE001
                if not (gpu and "CudaKernelParamCache not populated" in str(e)):
                    raise
                with tracing(TracingContext(traced.fake_mode)):
                    _run_python_wrapper_once(traced, patches)
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
    return BuiltArtifact(library, int(captured["num_outputs"]), captured["guard"])

