"""Host C++: Inductor's C++ scheduling (``CppScheduling``), kernels and wrapper built as one
library that addresses host memory.

It serves the CPU, and any device whose Inductor backend generates C++ (the eagerc
device on host memory, a vendor's host-memory device: examples/mydevice): a C++ kernel
addresses buffers as host pointers, so such a device's memory is host memory; its calls
are traced on CPU stand-ins, and ops whose wrappers call ATen's CPU functions run on
zero-copy CPU aliases of its tensors.
"""
from __future__ import annotations

import contextlib
import re

from eagerc.codegen.base import Codegen
from eagerc.codegen.cpp import one_unit
from eagerc.codegen.cpp.toolchain import cxx_compiler

# Inductor settings for C++ graphs (those this torch knows: 2.11-2.14 all do).
_PATCHES = {"cpp_wrapper_build_separate": True}

# Ops whose vectorized Inductor kernel is slower than its scalar loop: a strided window
# becomes per-lane masked gathers through a stack buffer (max_pool2d_with_indices 3x3/2 on
# 2x16x16x16, 1 thread, a timing loop of the op: 106 us vectorized, 33 us scalar, 25 us ATen).
SCALAR_LOOPS = frozenset({"aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices"})
SCALAR_LOOP_PATCHES = {"cpp.simdlen": 1}

# An input size/stride assertion of the wrapper: `assert_size_stride(arg0_1, {..}, {..}, ..);`
_ASSERT_SIZE_STRIDE = re.compile(r"^[ \t]*assert_size_stride\((\w+),[^;\n]*\);[ \t]*\n", re.M)


def drop_input_asserts(code: str, inputs) -> str:
    """Remove the wrapper's size/stride assertions on graph inputs. eagerc_guard already
    checks every size, stride and offset of every tensor input before the holder calls
    the entry (guard_source.bind_symbols), so these only cost: ~0.2 s of g++ per kernel
    (assert_size_stride instantiates string and stringstream code) and a stringstream per
    call. Assertions on extern kernels' outputs (named bufN) stay."""
    return _ASSERT_SIZE_STRIDE.sub(lambda m: "" if m.group(1) in inputs else m.group(0), code)


class CppCodegen(Codegen):
    name = "cpp"
    home = "cpu"
    # How eagerc has Inductor build a CPU kernel (the key's codegen.build_recipe: a change here
    # is a new namespace). Measured on torch 2.13, 2 cores: Inductor's default, one translation
    # unit (wrapper + kernels + Python binding) at -O3, cost ~1.6 s of g++ (its precompiled
    # header covers the wrapper's headers only, so the kernels' vector headers, cpp_prefix.h,
    # were parsed every time) and ~0.4 s of ld reading libtorch_cpu's 75k dynamic symbols.
    # Instead, Inductor's "build separate" mode: the wrapper (glue code) at -O1 on eagerc's own
    # header (codegen/cpp/glue_prelude.py), the kernels with Inductor's unchanged -O3 flags,
    # each translation unit with its own precompiled header, the two compiles in parallel,
    # libtorch linked through an empty stub (codegen/cpp/wrapper_build.py); input size asserts
    # left to eagerc's guard, its inputs in an array (codegen/cpp/input_array.py); a graph of
    # extern calls alone built as glue at -O1. ~0.9 s per kernel. Where clang is installed it
    # compiles both units (codegen/cpp/clang_units.py), as
    # one unit in one process that also links where it can (codegen/cpp/one_unit.py; both in
    # the key's "units" entry, compiler_settings).
    build_recipe = ("cpu-build-v2:separate-O1-wrapper:no-input-asserts:torch-cpu-link-stub:"
                    "glue-prelude-v1:input-array:torch-python-link-stub")
    op_patch_rules = (sorted(SCALAR_LOOPS), SCALAR_LOOP_PATCHES)
    # libtorch_python too: a wrapper calls none of its symbols (its Python binding is
    # glue_prelude's, on libpython), and its 30 MB dynamic symbol table cost the link 0.01 s.
    stub_linked_libraries = ("torch_cpu", "torch_python")
    _home_shim_call = re.compile(r"aoti_torch_cpu_\w+\(")
    # The BLAS calls read only data pointers, sizes and strides (their out= checks compare
    # devices with each other, the bias copy dispatches on the tensor's own device): 2 us
    # of an 8 us addmm saved by taking the device's tensors. CPU flash attention too: the
    # shim calls ATen's CPU kernel directly (at::cpu::), which allocates its outputs with
    # the query's options (the device's own allocation) and runs its DispatchStub for kCPU
    # by name, not by the tensors' device. Convolution is not one of them: ATen picks its
    # backend by the input's device type.
    _device_safe_shims = frozenset({
        "aoti_torch_cpu_mm_out(", "aoti_torch_cpu_addmm_out(", "aoti_torch_cpu_bmm_out(",
        "aoti_torch_cpu_baddbmm_out(", "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu("})

    def claims(self, scheduling) -> bool:
        from torch._inductor.codegen.cpp import CppScheduling

        kind = scheduling if isinstance(scheduling, type) else type(scheduling)
        return issubclass(kind, CppScheduling)

    def arch(self) -> str:
        from kernel_cache.environment import cpu_arch

        return cpu_arch()

    def compiler_settings(self) -> dict:
        # "threads": parallel kernels take the thread count at run time (compile/op.py);
        # kernels stored before that must not be loaded. "decompositions": changes whenever
        # a decomposition of cpu_decompositions.py changes the code it produces. "units": the
        # compiler of the kernel and wrapper units, clang's identity where clang builds them
        # (clang_units.py) and whether one clang process builds the library (one_unit.py),
        # or g++ (then "cxx" says which).
        return {"cxx": cxx_compiler(), "threads": "dynamic", "decompositions": "5",
                "units": one_unit.identity() or "g++"}

    def decompositions(self) -> dict:
        from eagerc.codegen.cpp.cpu_decompositions import CPU_DECOMPOSITIONS

        return CPU_DECOMPOSITIONS

    def inductor_patches(self, config) -> dict:
        return {k: v for k, v in _PATCHES.items() if hasattr(config, k)}

    def op_patches(self, op_qualname: str, args) -> dict:
        return dict(SCALAR_LOOP_PATCHES) if op_qualname in SCALAR_LOOPS else {}

    def rewrite_generated(self, code: str) -> str:
        from eagerc.codegen.cpp.scratch_buffers import scratch_buffers

        return scratch_buffers(code)

    def rewrite_for_entry(self, code: str, graph_inputs: set) -> str:
        from eagerc.compile.boxed_int_lists import fix_boxed_int_lists
        from eagerc.compile.direct_alloc import direct_allocations
        from eagerc.compile.output_asserts import cheap_output_asserts
        from eagerc.compile.scalar_reads import direct_scalar_reads

        from eagerc.codegen.cpp.input_array import inputs_as_array

        code = drop_input_asserts(fix_boxed_int_lists(direct_scalar_reads(code)), graph_inputs)
        return inputs_as_array(cheap_output_asserts(direct_allocations(code)))

    @contextlib.contextmanager
    def build_path(self):
        # Inductor's stride questions answered without sympy's simplify where that is exact
        # (vector_strides.py: most of a cold reduction's Python), while it generates this code.
        from eagerc.codegen.cpp import wrapper_build
        from eagerc.codegen.cpp.vector_strides import fast_vector_strides

        with fast_vector_strides(), wrapper_build.routed_builds(self):
            yield

    def wrapper_headers(self) -> dict:
        # What every wrapper uses covers a CPU wrapper (the CPU's C shims included).
        return {"cpu": ""}


CPP = CppCodegen()
