"""The cache of compiled glue (eagerc/compile/glue_objects.py): a wrapper is split into a
shape-generic program and the op's own bytes, the program's object is compiled once and
reused, a broken object is rebuilt, and the library built from the parts behaves as the
one-step build's. tools/bench_gpu.py cold measures the time it saves."""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

import eagerc
from eagerc.compile import glue_objects
from eagerc.compile.glue_prelude import MINIMAL_BINDING, prelude_text, slim_source
from eagerc.testing import assert_close
from test_glue_prelude import _cuda_include

DATA = Path(__file__).parent / "data"
SOFTMAX_KERNEL = "triton_red_fused_exp_prepare_softmax_online_sub_0"


def _gpu_wrapper(kernel_name: str, cubin: str, comment: str = "") -> str:
    """The softmax wrapper of tests/data, as if generated for a kernel of another name and
    cubin file, with a comment of its own."""
    code = (DATA / "gpu_wrapper_softmax.cpp").read_text()
    code = code.replace(SOFTMAX_KERNEL, kernel_name).replace(
        "// Topologically Sorted", f"// {comment} Topologically Sorted")
    return code.replace("CUBIN_PATH", cubin)


def test_wrappers_of_one_shape_split_into_one_program():
    a = glue_objects.split(_gpu_wrapper("triton_poi_fused_abs_0", "/tmp/a/abs.cubin", "abs"))
    b = glue_objects.split(_gpu_wrapper("triton_poi_fused_tanh_0", "/tmp/b/tanh.cubin", "tanh"))
    assert a.code == b.code
    assert "abs" not in a.code and ".incbin" not in a.code and "Topologically" not in a.code
    assert 'loadKernel(eagerc_cubin_0, eagerc_kernel_name_0,' in a.code
    assert "call_eagerc_kernel_0(" in a.code and "static CUfunction eagerc_kernel_0 = nullptr;" in a.code
    assert 'extern "C" const char eagerc_kernel_name_0[];' in a.code
    # The op's own part: its cubin and its kernel's name, as symbols the program declares.
    assert '.incbin "/tmp/a/abs.cubin"' in a.assembly and '.asciz "triton_poi_fused_abs_0"' in a.assembly
    assert '.incbin "/tmp/b/tanh.cubin"' in b.assembly and a.assembly != b.assembly


def test_a_longer_kernel_name_is_not_renamed_through_a_shorter_one():
    code = ('__asm__(".incbin \\"/c/0.cubin\\"\\n");\n__asm__(".incbin \\"/c/1.cubin\\"\\n");\n'
            'static CUfunction k_0 = nullptr; static CUfunction k_0_1 = nullptr;\n'
            'void f() { k_0 = loadKernel(eagerc_cubin_0, "k_0", 0); '
            'k_0_1 = loadKernel(eagerc_cubin_1, "k_0_1", 0); call_k_0_1(); }\n')
    split = glue_objects.split(code)
    assert "static CUfunction eagerc_kernel_0 = nullptr; static CUfunction eagerc_kernel_1 = nullptr;" in split.code
    assert "call_eagerc_kernel_1();" in split.code and "k_0" not in split.code
    assert '.asciz "k_0"' in split.assembly and '.asciz "k_0_1"' in split.assembly


def test_code_without_cubins_only_loses_its_comments():
    split = glue_objects.split("// a comment\nint f() { return 1; } // kept\n")
    assert split.code == "int f() { return 1; } // kept\n" and split.assembly == ""


@pytest.mark.skipif(_cuda_include() is None or shutil.which("g++") is None,
                    reason="needs g++ and CUDA's headers (no GPU)")
def test_a_gpu_wrapper_built_from_its_parts_embeds_its_cubin_and_kernel_name(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(glue_objects, "counts", {"hits": 0, "compiled": 0, "rebuilt": 0})
    torch_include = os.path.join(os.path.dirname(torch.__file__), "include")
    code, devices = slim_source(_gpu_wrapper(SOFTMAX_KERNEL, "CUBIN_FILE")
                                + MINIMAL_BINDING.format(entry_func="inductor_entry_cpp"))
    (tmp_path / "prelude.h").write_text(prelude_text(devices))
    libraries = []
    for name, cubin in (("one", b"\x7fELF-cubin-one"), ("two", b"\x7fELF-cubin-two")):
        (tmp_path / f"{name}.cubin").write_bytes(cubin)
        (tmp_path / f"{name}.cpp").write_text(
            code.replace("CUBIN_FILE", str(tmp_path / f"{name}.cubin")).replace(SOFTMAX_KERNEL, f"kernel_{name}"))
        command = (f"g++ {tmp_path}/{name}.cpp -std=c++17 -fPIC -O1 -w -D USE_CUDA -D TORCH_INDUCTOR_CPP_WRAPPER "
                   f"-I {sysconfig.get_paths()['include']} -I {torch_include} -I {_cuda_include()} "
                   f"-include {tmp_path}/prelude.h -o {tmp_path}/{name}.so -shared")
        assert glue_objects.build(command)
        libraries.append((tmp_path / f"{name}.so").read_bytes())
        symbols = subprocess.run(["nm", "-D", str(tmp_path / f"{name}.so")], capture_output=True, text=True).stdout
        assert "eagerc_entry" in symbols and "eagerc_guard" in symbols and "PyInit_inductor_entry_cpp" in symbols
    assert glue_objects.counts == {"hits": 1, "compiled": 1, "rebuilt": 0}  # one program, two ops
    for (name, cubin), library in zip((("one", b"\x7fELF-cubin-one"), ("two", b"\x7fELF-cubin-two")), libraries):
        assert cubin + b"\0" in library and f"kernel_{name}\0".encode() in library


@pytest.fixture
def fresh_compile(fresh_cache, tmp_path, monkeypatch):
    """Empty kernel and Inductor caches: the next compile really runs g++."""
    from torch._inductor import codecache

    def reset(tag: str):
        from eagerc import _C
        from eagerc.cache import service

        for entry in os.listdir(fresh_cache) if fresh_cache.exists() else []:
            if entry != "glue-objects":
                shutil.rmtree(fresh_cache / entry)
        service().reset()
        _C._clear_tables()
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / f"inductor-{tag}"))
        monkeypatch.setattr(codecache.CppWrapperCodeCache, "cache", {})

    monkeypatch.setattr(glue_objects, "counts", {"hits": 0, "compiled": 0, "rebuilt": 0})
    reset("first")
    return reset


def _mm_on_eagerc():
    x, y = torch.randn(8, 16), torch.randn(16, 4)
    with eagerc.enabled("cpu", ops=["aten::mm"]):
        out = torch.mm(x, y)
    assert_close(out, x @ y)


def test_an_extern_graph_reuses_its_compiled_glue_and_rebuilds_a_broken_one(fresh_compile, fresh_cache):
    compiles = eagerc.stats()["compiles"]
    _mm_on_eagerc()
    assert eagerc.stats()["compiles"] == compiles + 1
    assert glue_objects.counts == {"hits": 0, "compiled": 1, "rebuilt": 0}
    [obj] = list((fresh_cache / "glue-objects").glob("*.o"))
    assert obj.with_suffix(".cpp").read_text().count("eagerc_entry") == 1  # its program, beside it

    fresh_compile("second")  # a new kernel cache: the op compiles again, its glue does not
    _mm_on_eagerc()
    assert eagerc.stats()["compiles"] == compiles + 2
    assert glue_objects.counts == {"hits": 1, "compiled": 1, "rebuilt": 0}

    obj.write_bytes(obj.read_bytes()[:100])  # a truncated object is compiled again
    fresh_compile("third")
    _mm_on_eagerc()
    assert glue_objects.counts == {"hits": 1, "compiled": 2, "rebuilt": 1}
    assert obj.stat().st_size > 100


def test_switched_off_the_glue_is_compiled_in_one_step(fresh_compile, monkeypatch):
    monkeypatch.setenv("EAGERC_GLUE_OBJECTS", "0")
    _mm_on_eagerc()
    assert glue_objects.counts == {"hits": 0, "compiled": 0, "rebuilt": 0}
