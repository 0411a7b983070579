"""The code generator objects (eagerc/codegen/): each applies its own rewrites of a
generated wrapper, in its order, and routes Inductor's builds its own way. Runs without a
GPU: the Triton code generator's rewrites and build routing are plain text and process work."""
from __future__ import annotations

import pytest

from eagerc.codegen import CPP, TRITON
from eagerc.codegen.triton import plan_build

WRAPPER = """#include <torch/csrc/inductor/cpp_wrapper/cuda.h>
static CUfunction k0 = nullptr;
void inductor_entry_impl(AtenTensorHandle* input_handles, AtenTensorHandle* output_handles) {
    assert_size_stride(arg0_1, {s0}, {1L});
    double zuf0; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_item_float64(arg1_1, &zuf0));
    AOTICudaGuard device_guard(0);
    if (k0 == nullptr) k0 = loadKernel("/tmp/k0.cubin", "triton_poi_0", 0, cubin_dir_);
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(1, s, st, dt, dev, 0, &buf0_handle));
}
"""


def test_triton_rewrites_embed_cubins_and_keep_a_context_current():
    out = TRITON.rewrite_for_entry(WRAPPER, {"arg0_1", "arg1_1"})
    assert 'loadKernel(eagerc_cubin_0, "triton_poi_0", 0)' in out and '.incbin \\"/tmp/k0.cubin\\"' in out
    assert "eagerc_item_float64(arg1_1" in out and "eagerc_empty_strided(1," in out
    assert "cuCtxGetCurrent" in out  # after the device guard
    assert "assert_size_stride(arg0_1" in out  # input asserts are the C++ generator's to drop


def test_cpp_rewrites_drop_input_asserts_and_leave_gpu_code_alone():
    cpu = WRAPPER.replace('    if (k0 == nullptr) k0 = loadKernel("/tmp/k0.cubin", "triton_poi_0", 0, cubin_dir_);\n', "")
    out = CPP.rewrite_for_entry(cpu, {"arg0_1", "arg1_1"})
    assert "assert_size_stride(arg0_1" not in out
    assert "eagerc_item_float64(arg1_1" in out and "eagerc_empty_strided(1," in out
    assert "cuCtxGetCurrent" not in out and "eagerc_cubin" not in out


class Builder:
    def __init__(self, path, log):
        self.path, self.log = path, log

    def get_target_file_path(self):
        return str(self.path)

    def get_command_line(self):
        return f"g++ {self.path.parent}/w.cpp -O3 -g -shared -ltorch_cuda -o {self.path}"

    def build(self):
        self.log.append(self.get_command_line())
        self.path.write_text("built")


def _worker():
    from torch._inductor import codecache

    return codecache._worker_compile_cpp


@pytest.mark.parametrize("planned", [True, False])
def test_triton_builds_a_wrapper_from_its_plan_or_as_glue(tmp_path, monkeypatch, planned):
    tried, log = [], []

    def try_build(builder, command):
        tried.append(command)
        if planned:
            builder.path.write_text("plan")
        return planned

    monkeypatch.setattr(plan_build, "try_build", try_build)
    builder = Builder(tmp_path / "w.so", log)
    with TRITON.build_path():
        _worker()(str(tmp_path / "lock"), [builder])
    assert len(tried) == 1
    if planned:
        assert log == [] and builder.path.read_text() == "plan"
    else:  # glue: -O1, no debug info, -w, libtorch_cuda through a stub
        [line] = log
        words = line.split()
        assert "-O1" in words and "-O3" not in words and "-g" not in words and words[-1] == "-w"
        assert "-ltorch_cuda" not in words


def test_cpp_leaves_a_one_step_build_of_kernels_to_inductor(tmp_path, monkeypatch):
    from torch._inductor import codecache

    seen = []
    monkeypatch.setattr(codecache, "_worker_compile_cpp", lambda lock, builders: seen.append(len(builders)))
    (tmp_path / "w.cpp").write_text('#include "cpp_wrapper/cpu.h"\nvoid cpp_fused_abs_0() {}\n')
    with CPP.build_path():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), [Builder(tmp_path / "w.so", [])])
    assert seen == [1]


def test_triton_compiles_its_kernels_in_this_process():
    # An op's few small kernels compile faster in-process than through Inductor's pool of
    # worker processes, whose workers each start on their first kernel.
    import torch._inductor.config as inductor_config
    from torch._inductor.async_compile import AsyncCompile

    patches = TRITON.inductor_patches(inductor_config)
    assert patches["compile_threads"] == 1
    with inductor_config.patch(patches):
        assert not AsyncCompile.use_process_pool()
    assert "compile_threads" not in CPP.inductor_patches(inductor_config)
