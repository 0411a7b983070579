"""eagerc's own wrapper header (eagerc/codegen/cpp/glue_prelude.py): generated wrappers build
on it instead of Inductor's header, a wrapper it cannot build falls back to Inductor's, and
the library still imports. Behaviour only; tools/bench_cold.py measures the time."""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

import eagerc
from eagerc.codegen import CPP, TRITON
from eagerc.codegen.cpp import glue_prelude, one_unit
from eagerc.codegen.cpp.glue_prelude import MINIMAL_BINDING, _compile_flags, prelude_text, slim_source
from eagerc.codegen.triton import lean_gpu_prelude
from eagerc.testing import assert_close

DATA = Path(__file__).parent / "data"


def _cuda_include():
    for base in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"))):
        if base and os.path.exists(os.path.join(base, "include", "cuda.h")):
            return os.path.join(base, "include")
    return None


@pytest.fixture
def fresh_inductor(fresh_cache, tmp_path, monkeypatch):
    """An empty Inductor cache as well: the compiles in the test really run g++."""
    from torch._inductor import codecache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    # Wrappers compiled, as this file tests: not CPU kernels' plans (tests/test_cpu_kernel_plan.py).
    monkeypatch.setenv("EAGERC_CPU_PLAN", "0")
    monkeypatch.setattr(codecache.CppWrapperCodeCache, "cache", {})
    monkeypatch.setattr(glue_prelude, "counts", {"lean": 0, "slim": 0, "fallback": 0})
    monkeypatch.setattr(one_unit, "counts", {"one_unit": 0, "declined": 0})
    return tmp_path


def test_the_wrapper_header_lines_are_removed_and_their_devices_named():
    code = ("\n#include <torch/csrc/inductor/cpp_wrapper/cuda.h>\n"
            "#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\n#include <vector>\nint f();\n")
    slim, devices = slim_source(code, TRITON)
    assert devices == {"cpu", "cuda"}
    assert slim == "\n#include <vector>\nint f();\n"
    assert slim_source("int f();\n", TRITON) is None  # not a generated wrapper
    assert slim_source("#include <torch/csrc/inductor/cpp_wrapper/xpu.h>\n", TRITON) is None  # not covered
    # Which devices a prelude covers is the code generator's: C++ code has no CUDA header.
    assert slim_source(code, CPP) is None
    assert slim_source("#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\nint f();\n", CPP)[1] == {"cpu"}


def test_a_precompiled_header_takes_the_compile_flags_alone():
    command = ("g++ /c/w.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS "
               "-O1 -fPIC -include /h/inductor.h -I/inc -o /c/w.so -shared -ltorch "
               "-Wl,--push-state,--no-as-needed /tmp/stub/libtorch_cpu.so -Wl,--pop-state -L/lib -w")
    assert _compile_flags(command, "/c/w.cpp") == [
        "g++", "-D", "TORCH_INDUCTOR_CPP_WRAPPER", "-O1", "-fPIC", "-I/inc", "-w"]


_CHECKS = """
#include <cstdio>
#include <cstring>
static int deleted[4];
static void count(void* p) { ++*static_cast<int*>(p); }
static AtenTensorHandle handle(int i) { return reinterpret_cast<AtenTensorHandle>(&deleted[i]); }
int main() {
  try {
    AOTI_TORCH_ERROR_CODE_CHECK(AOTI_TORCH_FAILURE);
  } catch (const std::runtime_error& e) {
    std::printf("%s\\n", e.what());
  }
  using Owner = std::unique_ptr<AtenTensorOpaque, void (*)(void*)>;
  {
    Owner a(handle(0), count), b(handle(1), count);
    void* first_word;  // the layout: libstdc++ stores the deleter first
    std::memcpy(&first_word, &a, sizeof first_word);
    std::printf("%d\\n", first_word == reinterpret_cast<void*>(count));
    a.reset(handle(2));               // deletes 0
    b = std::move(a);                 // deletes 1; b owns 2
    std::printf("%d %d\\n", a.get() == nullptr, b.get() == handle(2));
    Owner c(std::move(b));
    AtenTensorHandle loose = c.release();  // 2 leaves, never deleted
    c.reset(handle(3));               // deleted at the end of the scope
    std::printf("%d %d\\n", loose == handle(2), static_cast<bool>(c));
  }
  std::printf("%d %d %d %d %zu\\n", deleted[0], deleted[1], deleted[2], deleted[3], sizeof(Owner));
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_preludes_error_check_and_handle_owner_behave_as_torchs(tmp_path):
    # glue_prelude._COMMON's throw_exception and its unique_ptr of a tensor handle against
    # torch's header alone: the same output (message, deletions, size); and the prelude's
    # unit compiles no stringstream code (what it saves).
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    torch_header = "#include <memory>\n#include <torch/csrc/inductor/aoti_runtime/utils.h>\n"
    said, symbols = {}, {}
    for name, header in (("prelude", prelude_text({"cpu"}, CPP)), ("torch", torch_header)):
        (tmp_path / f"{name}.h").write_text(header)
        (tmp_path / "check.cpp").write_text(_CHECKS)
        built = subprocess.run(
            ["g++", "-std=c++17", "-O1", "-w", "-I", sysconfig.get_paths()["include"], "-I", include,
             "-include", str(tmp_path / f"{name}.h"), str(tmp_path / "check.cpp"), "-o", str(tmp_path / name)],
            capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stderr[-3000:]
        said[name] = subprocess.run([str(tmp_path / name)], capture_output=True, text=True, timeout=60).stdout
        symbols[name] = subprocess.run(["nm", "-C", str(tmp_path / name)], capture_output=True, text=True).stdout
    assert said["prelude"] == said["torch"]
    lines = said["prelude"].splitlines()
    assert lines[0].startswith("AOTI_TORCH_FAILURE API call failed at ") and lines[1:] == ["1", "1 1", "1 1", "1 1 0 1 16"]
    assert "basic_stringstream" in symbols["torch"] and "basic_stringstream" not in symbols["prelude"]


def _on_prelude() -> int:
    """Wrappers built on eagerc's prelude: alone, or as one unit with their kernels."""
    return glue_prelude.counts["slim"] + one_unit.counts["one_unit"]


def test_kernels_and_extern_graphs_build_on_the_prelude(fresh_inductor):
    x, w = torch.randn(6, 10), torch.randn(10, 4)
    with eagerc.enabled("cpu", ops=["aten::tanh", "aten::mm"]):
        assert_close(torch.tanh(x), x.clone().tanh_())  # a C++ kernel + its wrapper
        assert_close(x @ w, torch.mm(x, w))              # a wrapper of one extern call
    ops = eagerc.stats()["ops"]
    assert ops["aten::tanh@CPU"]["compiles"] == 1 and ops["aten::mm@CPU"]["compiles"] == 1
    # Both wrappers on the prelude (CPU wrappers: never lean): compiled alone on it, or with
    # their kernels as one unit over its precompiled header (one_unit, where clang is).
    assert _on_prelude() == 2 and glue_prelude.counts["lean"] == glue_prelude.counts["fallback"] == 0


def test_a_wrapper_the_prelude_cannot_build_is_built_on_inductors_header(fresh_inductor, monkeypatch):
    # A prelude that lacks what the wrapper uses: its build fails, Inductor's header builds.
    monkeypatch.setattr(glue_prelude, "_COMMON", "#pragma once\n#include <Python.h>\n")
    x = torch.randn(5, 3)
    with eagerc.enabled("cpu", ops=["aten::sigmoid"]):
        assert_close(torch.sigmoid(x), x.clone().sigmoid_())
    assert glue_prelude.counts == {"lean": 0, "slim": 0, "fallback": 1}
    assert eagerc.stats()["ops"]["aten::sigmoid@CPU"]["compiles"] == 1


def test_off_switch_uses_inductors_header(fresh_inductor, monkeypatch):
    monkeypatch.setenv("EAGERC_GLUE_PRELUDE", "0")
    x = torch.randn(4, 4)
    with eagerc.enabled("cpu", ops=["aten::neg"]):
        assert_close(torch.neg(x), -x)
    assert glue_prelude.counts == {"lean": 0, "slim": 0, "fallback": 0}


def test_the_built_library_imports_and_its_python_entry_refuses(fresh_inductor):
    from torch._inductor.codecache import CppWrapperCodeCache

    with eagerc.enabled("cpu", ops=["aten::exp"]):
        torch.exp(torch.randn(3))
    libraries = list((fresh_inductor / "inductor").rglob("*.main.so"))
    assert libraries and _on_prelude() == 1
    spec = importlib.util.spec_from_file_location("eagerc_probe.inductor_entry_cpp", libraries[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(RuntimeError, match="eagerc's kernel holder calls this library"):
        module.inductor_entry_cpp([])
    assert CppWrapperCodeCache.suffix_template != glue_prelude.MINIMAL_BINDING  # restored
    sys.modules.pop("eagerc_probe.inductor_entry_cpp", None)


def test_an_unbuildable_header_is_not_tried_again(tmp_path, monkeypatch):
    monkeypatch.setattr(glue_prelude, "_header_dir", lambda: str(tmp_path))
    monkeypatch.setattr(glue_prelude, "_unusable", set())
    flags = ["g++", "-fno-such-flag-anywhere"]
    assert glue_prelude.precompiled_prelude(flags, {"cpu"}, CPP) is None
    assert len(glue_prelude._unusable) == 1
    assert glue_prelude.precompiled_prelude(flags, {"cpu"}, CPP) is None  # remembered, no second g++
    assert not list(tmp_path.glob("*.gch"))


@pytest.mark.skipif(_cuda_include() is None or shutil.which("g++") is None,
                    reason="needs g++ and CUDA's headers (no GPU)")
def test_a_generated_gpu_wrapper_compiles_on_the_cuda_prelude(tmp_path):
    # A wrapper Inductor generated on the H100 (tests/data): the CUDA prelude declares all
    # it uses (the driver API, the guards, the shims), with eagerc's import stub appended.
    code = (DATA / "gpu_wrapper_softmax.cpp").read_text() + MINIMAL_BINDING.format(entry_func="inductor_entry_cpp")
    slim, devices = slim_source(code, TRITON)
    assert devices == {"cuda"} and "cpp_wrapper/cuda.h" not in slim
    (tmp_path / "prelude.h").write_text(prelude_text(devices, TRITON))
    (tmp_path / "wrapper.cpp").write_text(slim)
    torch_include = os.path.join(os.path.dirname(torch.__file__), "include")
    done = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-w", "-D", "USE_CUDA", "-D", "TORCH_INDUCTOR_CPP_WRAPPER",
         "-I", sysconfig.get_paths()["include"], "-I", torch_include, "-I", _cuda_include(),
         "-include", str(tmp_path / "prelude.h"), str(tmp_path / "wrapper.cpp")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _generated_gpu_wrapper():
    code = (DATA / "gpu_wrapper_softmax.cpp").read_text() + MINIMAL_BINDING.format(entry_func="inductor_entry_cpp")
    return slim_source(code, TRITON)


def test_a_gpu_wrapper_fits_the_lean_header_unless_it_names_what_the_header_lacks():
    code, devices = _generated_gpu_wrapper()
    assert lean_gpu_prelude.fits(code, devices)
    other = code.replace("eagerc_empty_strided(2,", "aoti_torch_proxy_executor_call_function(p, 0); eagerc_empty_strided(2,")
    assert not lean_gpu_prelude.fits(other, devices)  # a shim the lean header does not declare
    assert not lean_gpu_prelude.fits(code.replace("int64_t s50", "c10::SymInt x; int64_t s50"), devices)
    assert not lean_gpu_prelude.fits(code, {"cpu"}) and not lean_gpu_prelude.fits(code, {"cpu", "cuda"})


def test_the_file_path_kernel_loader_is_dropped_whole():
    code, _ = _generated_gpu_wrapper()
    lean = lean_gpu_prelude.without_file_loader(code)
    assert "std::string filePath" in code and "std::string filePath" not in lean
    assert "std::filesystem" not in lean and lean.count("static inline CUfunction loadKernel(") == 1
    assert len(code) - len(lean) < 1200  # that function alone
    assert lean_gpu_prelude.without_file_loader(lean) == lean


def _compile_on_the_lean_header(tmp_path, code: str, devices) -> Path:
    """`code` (cubin paths CUBIN_PATH or CUBIN_PATH_<n>) compiled to an object on the lean
    header with no torch header at all; its path."""
    (tmp_path / "kernel.cubin").write_bytes(b"\x7fELF a cubin")
    code = re.sub(r"CUBIN_PATH(_\d+)?", str(tmp_path / "kernel.cubin"), code)
    (tmp_path / "lean.h").write_text(glue_prelude.prelude_text(devices, TRITON, lean=True))
    (tmp_path / "wrapper.cpp").write_text(lean_gpu_prelude.without_file_loader(code))
    done = subprocess.run(
        ["g++", "-std=c++17", "-c", "-fPIC", "-O1", "-w", "-I", sysconfig.get_paths()["include"],
         "-I", _cuda_include(), "-include", str(tmp_path / "lean.h"), str(tmp_path / "wrapper.cpp"),
         "-o", str(tmp_path / "wrapper.o")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path / "wrapper.o"


needs_cuda_headers = pytest.mark.skipif(_cuda_include() is None or shutil.which("g++") is None,
                                        reason="needs g++ and CUDA's headers (no GPU)")


@needs_cuda_headers
def test_a_generated_gpu_wrapper_compiles_on_the_lean_header(tmp_path):
    # Everything it names is declared: entry and guard defined, the shims left to libtorch.
    obj = _compile_on_the_lean_header(tmp_path, *_generated_gpu_wrapper())
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    assert " T eagerc_entry" in symbols and " T eagerc_guard" in symbols
    assert " U aoti_torch_empty_strided" in symbols and " U aoti_torch_get_current_cuda_stream" in symbols


def test_a_lean_build_that_fails_is_built_on_the_full_prelude(tmp_path, monkeypatch):
    # A GPU wrapper that fits the lean header but does not build on it: the full header
    # builds it, with its code as generated (file-path loader included).
    code = (DATA / "gpu_wrapper_softmax.cpp").read_text()
    (tmp_path / "w.cpp").write_text(code)
    monkeypatch.setattr(glue_prelude, "counts", {"lean": 0, "slim": 0, "fallback": 0})
    monkeypatch.setattr(one_unit, "counts", {"one_unit": 0, "declined": 0})
    monkeypatch.setattr(glue_prelude, "precompiled_prelude",
                        lambda flags, devices, codegen, lean=False: f"/h/{'lean' if lean else 'full'}.h")
    tried = []

    class Builder:
        def get_command_line(self):
            return f"g++ {tmp_path}/w.cpp -include /inductor/cuda.h -o {tmp_path}/w.so -shared"

        def build(self):
            line = self.get_command_line()
            tried.append((line, (tmp_path / "w.eagerc.cpp").read_text()))
            if "/h/lean.h" in line:
                raise RuntimeError("error: 'something' was not declared in this scope")

    builder = Builder()
    assert glue_prelude.slim_build(builder, builder.get_command_line(), TRITON)
    assert [("/h/lean.h" in line, "std::string filePath" in text) for line, text in tried] == [
        (True, False), (False, True)]
    assert glue_prelude.counts == {"lean": 0, "slim": 1, "fallback": 0}
    monkeypatch.setenv("EAGERC_GLUE_PRELUDE", "full")  # the switch: the full header at once
    tried.clear()
    builder = Builder()
    assert glue_prelude.slim_build(builder, builder.get_command_line(), TRITON)
    assert len(tried) == 1 and "/h/full.h" in tried[0][0]


# Wrappers Inductor generated on the H100 (tests/data/gpu_wrappers): Triton kernels, and two
# cuBLAS externs (mm, addmm) whose prototypes the lean header takes from torch's
# c_shim_cuda.h (where this torch has the header).
GPU_WRAPPERS = {"layer_norm": True, "embedding": True, "add_alpha": True, "cumsum": True,
                "where": True, "sum_dim": True, "mm": True, "addmm": True}
_EXTERNS = {"mm": "aoti_torch_cuda_mm_out", "addmm": "aoti_torch_cuda_addmm_out"}


def _fits_here(name: str) -> bool:
    return GPU_WRAPPERS[name] and _EXTERNS.get(name, "aoti_torch_cuda_mm_out") in lean_gpu_prelude._extern_declarations()


@pytest.mark.parametrize("name", sorted(GPU_WRAPPERS))
def test_generated_gpu_wrappers_fit_the_lean_header(name):
    code, devices = slim_source((DATA / "gpu_wrappers" / f"{name}.cpp").read_text(), TRITON)
    assert lean_gpu_prelude.fits(code, devices) == (_fits_here(name) if name in _EXTERNS else GPU_WRAPPERS[name])


def test_extern_prototypes_are_this_torchs():
    externs = lean_gpu_prelude._extern_declarations()
    if not externs:
        pytest.skip("this torch has no c_shim_cuda.h")
    assert externs["aoti_torch_cuda_mm_out"] == (
        "AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2);")
    assert lean_gpu_prelude.text().count("aoti_torch_cuda_") >= len(externs)


@pytest.mark.slow
@needs_cuda_headers
@pytest.mark.parametrize("name", sorted(n for n in GPU_WRAPPERS if _fits_here(n)))
def test_generated_gpu_wrappers_that_fit_compile_on_the_lean_header(tmp_path, name):
    # What fits must build: a wrapper that fits but fails costs a second compile (the
    # layer_norm wrapper did, until the header declared wrap_with_raii_handle_if_needed).
    _compile_on_the_lean_header(tmp_path, *slim_source((DATA / "gpu_wrappers" / f"{name}.cpp").read_text(), TRITON))
