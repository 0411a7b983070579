"""Triton kernels on CUDA memory, launched by Inductor's JIT C++ wrapper (or by eagerc's plan
launcher, from a launch plan read off that wrapper).

It serves CUDA (override mode), the eagerc device on GPU memory (``EAGERC_BACKING=cuda``) and
a vendor's device whose memory is CUDA memory (examples/mygpu): calls are traced on CUDA
stand-ins, kernels launch on the current stream of the device the signature names, and the
cubins are embedded in the artifact, so an artifact is one self-contained file. A vendor's
device says its memory is CUDA memory by what it registers with Inductor: CUDA's device op
overrides, with which Inductor writes its wrappers' streams, device guards and launches. A
device whose Inductor backend generates Triton launched any other way is refused: this code
loads and launches cubins through the CUDA driver, on CUDA memory.
"""
from __future__ import annotations

import contextlib
import re

import torch

from eagerc.codegen.base import Codegen
from eagerc.codegen.triton import batch_norm_statistics

# Inductor settings for GPU graphs: kernels compiled and tuned while the graph compiles,
# their cubins kept for the C++ wrapper, no CUDA graphs (the holder launches per call).
# (torch 2.11's JIT C++ wrapper breaks with autotune_at_compile_time=False: its first,
# Python pass is generated under cpp_wrapper=True and does not parse.)
# Triton compiles in this process, not in Inductor's pool of worker processes: an op's graph
# has one to a few small kernels, and a fresh pool's workers each start (import torch and
# Triton) on their first kernel, so waiting on the pool took most of a model's first forward
# (GPT-2 on an H100: 7.9 s through the pool, 5.5 s in-process; docs/benchmarks.md).
_PATCHES = {"triton.store_cubin": True, "triton.cudagraphs": False,
            "triton.autotune_at_compile_time": True, "compile_threads": 1}

# What Inductor's GPU wrapper emits to load one kernel from its cubin file (JIT mode).
_LOAD_KERNEL_FROM_FILE = re.compile(
    r'loadKernel\(\s*"(?P<path>[^"]+)"\s*,\s*(?P<name>"[^"]+")\s*,\s*(?P<shm>[^,()]+?)\s*,\s*cubin_dir_\s*\)')


def embed_cubins(code: str) -> str:
    """Replace every ``loadKernel("<file>.cubin", name, shm, cubin_dir_)`` by a load from
    bytes linked into the library (Inductor's in-memory overload of loadKernel)."""
    from eagerc.refusals import CompileError
    from eagerc.compile.wrapper_source import after_header

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


def computes_on_gpu(traced) -> bool:
    """Whether the graph computes on CUDA: an input there, or (a factory such as arange,
    which has no tensor input) a value it makes there. A factory taken for a CPU graph got
    CPU's device helpers in Inductor's GPU wrapper (its Python pass wrote `with pass:`)."""
    values = list(traced.fakes) + [node.meta.get("val") for node in traced.gm.graph.nodes]
    return any(isinstance(v, torch.Tensor) and v.device.type == TRITON.home
               for v in torch.utils._pytree.tree_leaves(values))


def _run_python_wrapper_once(traced) -> None:
    """Compile the graph with Inductor's Python wrapper and run it once on random inputs
    of the fakes' sizes: this compiles and tunes its Triton kernels and records their
    cubins and launch parameters, which the C++ wrapper's code generation reads (torch
    versions whose JIT C++ wrapper does not do this pass itself)."""
    from torch._dynamo.utils import defake
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx_inner

    with tracing(TracingContext(traced.fake_mode)):
        real = [f.node.hint if isinstance(f, torch.SymInt) else defake(f) for f in traced.fakes]
        compiled = compile_fx_inner(traced.gm, traced.fakes, is_inference=True)
        compiled(list(real))
        torch.cuda.synchronize()


class TritonCodegen(Codegen):
    name = "triton"
    home = "cuda"
    # How eagerc builds a GPU graph (the key's codegen.build_recipe): the wrapper (glue) at -O1
    # on eagerc's header (the lean one where it fits: codegen/triton/lean_gpu_prelude.py),
    # linked through libtorch stubs; a wrapper of Triton kernels and cuBLAS's mm family is no
    # compile at all but a launch plan appended to the plan launcher
    # (codegen/triton/launch_plan.py, plan_build.py).
    build_recipe = ("gpu-build-v4:O1-glue:no-debug-info:torch-link-stubs:glue-prelude-v1:"
                    "lean-gpu-prelude-v2:plan-launcher-v1")
    # Inductor and Triton imports, the wrapper's precompiled header: ~70 s on the GPU machine.
    first_compile_is_costly = True
    op_patch_rules = (sorted(batch_norm_statistics.EVAL_BATCH_NORMS.items()), batch_norm_statistics.PATCHES)
    # A GPU wrapper links both (its host code calls CPU shims too).
    stub_linked_libraries = ("torch_cpu", "torch_cuda")
    _home_shim_call = re.compile(r"aoti_torch_cuda_\w+\(")
    # No ATen function: CUDA's shims call ATen's CUDA kernels, whose generated wrappers
    # guard the tensors' device with a CUDAGuard, which refuses any other device type
    # ("CUDAGuardImpl initialized with non-CUDA DeviceType: eagerc": cuBLAS addmm_out on
    # the eagerc device's tensors crashed the process on the H100). Only the runtime
    # helpers, which act on the current CUDA device (device guard, raw caching-allocator
    # memory), not on tensors.
    _device_safe_shims = frozenset({"aoti_torch_cuda_guard_set_index(",
                                    "aoti_torch_cuda_caching_allocator_raw_alloc(",
                                    "aoti_torch_cuda_caching_allocator_raw_delete("})

    def claims(self, scheduling) -> bool:
        from torch._inductor.codegen.cuda_combined_scheduling import CUDACombinedScheduling
        from torch._inductor.codegen.triton import TritonScheduling

        kind = scheduling if isinstance(scheduling, type) else type(scheduling)
        # A combined scheduling delegates its kernels to a Triton one: judged by the
        # instance's delegate, or by the class where it cannot be built without a graph
        # (the eagerc device's on GPU memory, which refuses torch.compile).
        return issubclass(kind, (TritonScheduling, CUDACombinedScheduling)) or isinstance(
            getattr(scheduling, "_triton_scheduling", None), TritonScheduling)

    def naming_calls(self, library: bytes) -> bytes | None:
        from eagerc.codegen.triton import plan_build

        # The launcher a plan is appended to names every extern it can call.
        plan = plan_build.appended_plan(library)
        return None if plan is None else plan.encode()

    def unavailable(self) -> str | None:
        if not torch.cuda.is_available():
            return ("no CUDA GPU is present (torch.cuda.is_available() is False"
                    + ("; this torch is a CPU-only build" if torch.version.cuda is None else "") + ")")
        from torch.utils._triton import has_triton

        if not has_triton():
            return "eagerc compiles CUDA kernels with Triton, which is not installed (pip install triton)"
        return None

    def refusal_for(self, device: str) -> str | None:
        """None where the device's Inductor backend launches its kernels with CUDA's device op
        overrides (CUDA streams, CUDA device guards, the CUDA driver's loadKernel and
        launchKernel): its buffers are then CUDA device pointers, device N's on cuda:N,
        which is what this code addresses; its calls are traced on CUDA stand-ins. Any
        other launch (a vendor's own driver and streams) is refused, saying so."""
        from torch._inductor.codegen.common import get_device_op_overrides
        from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

        try:
            overrides = get_device_op_overrides(device)
        except KeyError:
            overrides = None
        if isinstance(overrides, CUDADeviceOpOverrides):
            return None
        how = ("registers no device op overrides" if overrides is None
               else f"launches them with {type(overrides).__name__}, not CUDA's device op overrides")
        return (f"Inductor's backend for {device!r} generates Triton kernels and {how}; eagerc runs "
                "Triton kernels on CUDA memory only (it loads and launches their cubins through the "
                "CUDA driver, on the CUDA stream of the device's index). A device whose memory is "
                "CUDA memory (device N's on cuda:N) registers CUDA's: torch._inductor.codegen.common."
                f"register_device_op_overrides({device!r}, CUDADeviceOpOverrides()) "
                "(examples/mygpu, docs/vendor.md)")

    def arch(self) -> str:
        from kernel_cache.environment import cuda_arch

        return cuda_arch()

    def compiler_settings(self) -> dict:
        import triton

        from eagerc.codegen.cpp.generator import CPP
        from eagerc.codegen.cpp.toolchain import cxx_compiler

        # The wrapper is host C++ too: the C++ compiler and how eagerc builds host C++ count.
        return {"cxx": cxx_compiler(), "host_build": CPP.build_recipe, "triton": triton.__version__}

    def inductor_patches(self, config) -> dict:
        return dict(_PATCHES)

    def op_patches(self, op_qualname: str, args) -> dict:
        if batch_norm_statistics.is_eval_batch_norm(op_qualname, args):
            return dict(batch_norm_statistics.PATCHES)
        return {}

    def decompositions(self) -> dict:
        return dict(batch_norm_statistics.DECOMPOSITIONS)

    def prepare(self, traced) -> None:
        """Inductor imports its per-device C++ helpers (CUDA's loadKernel, launchKernel)
        only while its table is empty; once another device (the eagerc device) registered
        its own, CUDA's must be imported by name. A graph that makes nothing on CUDA is
        not this code's."""
        import torch._inductor.codegen.cuda.device_op_overrides  # noqa: F401 - registers on import
        from torch._inductor.codegen.common import init_backend_registration

        from eagerc.refusals import CompileError

        init_backend_registration()
        if not computes_on_gpu(traced):
            raise CompileError("the graph computes nothing on a CUDA device")

    def rewrite_for_entry(self, code: str, graph_inputs: set) -> str:
        from eagerc.codegen.triton.gpu_context import make_context_current
        from eagerc.codegen.triton.gpu_launch_types import fix_float_launch_params
        from eagerc.codegen.triton.stream_declarations import drop_repeated_stream_declarations
        from eagerc.compile.boxed_int_lists import fix_boxed_int_lists
        from eagerc.compile.direct_alloc import direct_allocations
        from eagerc.compile.output_asserts import cheap_output_asserts
        from eagerc.compile.scalar_reads import direct_scalar_reads

        code = drop_repeated_stream_declarations(embed_cubins(code))
        code = fix_boxed_int_lists(direct_scalar_reads(code))
        code = make_context_current(fix_float_launch_params(code))
        return cheap_output_asserts(direct_allocations(code))

    def build_path(self):
        from eagerc.codegen.cpp import wrapper_build
        from eagerc.codegen.triton import plan_build

        # Every build of a GPU wrapper is one compile-and-link of glue (its kernels are
        # Triton's), or none: a launch plan.
        return wrapper_build.routed_builds(
            self, is_glue=lambda builder: True,
            build=lambda builder: wrapper_build.build_glue(builder, self, from_plan=plan_build.try_build))

    def wrapper_headers(self) -> dict:
        from eagerc.codegen.triton import lean_gpu_prelude

        # A GPU wrapper may also compute on the CPU (what every wrapper uses covers that).
        return {"cpu": "", "cuda": lean_gpu_prelude.FULL_PRELUDE_CUDA}

    def lean_prelude(self):
        from eagerc.codegen.triton import lean_gpu_prelude

        return lean_gpu_prelude

    def retry_after(self, error: Exception, traced, patches: dict) -> bool:
        if "CudaKernelParamCache not populated" not in str(error):
            return False
        _run_python_wrapper_once(traced)
        return True


TRITON = TritonCodegen()
