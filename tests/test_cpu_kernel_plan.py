"""CPU kernels built without their wrapper (eagerc/codegen/cpp/kernel_plan.py): the kernels and
a plain entry on the kernels' own precompiled header, where the wrapper's statements are all
ones the plan says; the whole wrapper built otherwise. Counts and library contents, not
seconds: tools/bench_cold.py --compile measures the time."""
from __future__ import annotations

import collections
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from eagerc.codegen.cpp import kernel_plan, one_unit
from eagerc.compile.direct_alloc import _POINTER
from eagerc.compile.inductor_wrapper import _ENTRY
from eagerc.codegen.cpp.glue_prelude import MINIMAL_BINDING

_GUARD = """
extern "C" int eagerc_guard(const int64_t* I, const double* F) {
  const int64_t s50 = I[0];
  (void)s50;
  if (!(s50 >= int64_t(2LL))) return 0;
  return 1;
}
"""

_BODY = """    RAIIAtenTensorHandle inputs[2] = {RAIIAtenTensorHandle(input_handles[0]), RAIIAtenTensorHandle(input_handles[1])};
    auto arg0_1 = std::move(inputs[0]);
    int64_t arg1_1;
    AOTI_TORCH_ERROR_CODE_CHECK(eagerc_item_int64(inputs[1], &arg1_1));
    auto arg0_1_size = arg0_1.sizes();
    int64_t s50 = arg0_1_size[0];
    const int64_t int_array_0[] = {s50, };
    static constexpr int64_t int_array_1[] = {1L, };
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(eagerc_empty_strided(1, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    cpp_fused_0((const float*)(arg0_1.data_ptr()), (float*)(buf0.data_ptr()), s50, arg1_1);
    arg0_1.reset();
    output_handles[0] = buf0.release();
"""


def _wrapper(body: str = _BODY, header: str = "#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\n") -> str:
    from eagerc.compile.scalar_reads import _SCALAR_READS

    return (f"\n{header}{_POINTER}{_SCALAR_READS}"
            'extern "C"  void  cpp_fused_0(const float* in_ptr0,\n    float* out_ptr0,\n'
            "    const int64_t ks0,\n    const int64_t ks1);\n"
            "CACHE_TORCH_DTYPE(float32);\nCACHE_TORCH_DEVICE(cpu);\n\n"
            "void inductor_entry_impl(\n    AtenTensorHandle*\n        input_handles,\n"
            "    AtenTensorHandle*\n        output_handles\n) {\n"
            f"{body}}} // inductor_entry_impl\n{_ENTRY}{_GUARD}"
            f"{MINIMAL_BINDING.format(entry_func='inductor_entry_cpp')}")


def test_a_wrappers_steps_become_a_plain_entry():
    entry = kernel_plan.entry_unit(_wrapper())
    # The wrapper's runtime is gone: no RAII handles, error-check macro, cached statics,
    # Python.h binding or the wrapper's function.
    for gone in ("RAIIAtenTensorHandle", "AOTI_TORCH_ERROR_CODE_CHECK", "cached_torch_",
                 "inductor_entry_impl", "PyMODINIT_FUNC", "#include"):
        assert gone not in entry, gone
    assert "AtenTensorHandle arg0_1 = eagerc_in[0];" in entry
    assert "EAGERC_PLAN_CHECK(eagerc_item_int64(eagerc_in[1], &arg1_1));" in entry
    assert "aoti_torch_dtype_float32(), aoti_torch_device_type_cpu()" in entry
    assert "cpp_fused_0((const float*)(eagerc_data(arg0_1)), (float*)(eagerc_data(buf0.h)), s50, arg1_1);" in entry
    assert "eagerc_out[0] = buf0.release();" in entry
    assert "eagerc_stolen stolen{inputs, 2};" in entry  # eagerc_entry still steals its inputs
    assert _GUARD in entry and "eagerc_set_allocator" in entry and "PyInit_inductor_entry_cpp" in entry


def test_an_input_returned_as_it_is_gets_a_new_handle():
    body = _BODY.replace("output_handles[0] = buf0.release();",
                         "output_handles[0] = buf0.release();\n    output_handles[1] = arg0_1.release();")
    assert "eagerc_out[1] = eagerc_new_handle(arg0_1);" in kernel_plan.entry_unit(_wrapper(body))


@pytest.mark.parametrize("change", [
    # an extern kernel (ATen's, through its shim)
    ("    arg0_1.reset();\n", "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_mm_out(buf0, arg0_1, arg0_1));\n"),
    # a name the entry did not define
    ("s50, arg1_1);", "s50, unknown_size);"),
    # a member call in an expression
    ("int64_t s50 = arg0_1_size[0];", "int64_t s50 = arg0_1.numel();"),
    # a kernel the wrapper does not declare
    ("cpp_fused_0(", "cpp_fused_1("),
    # an output that is not a tensor
    ("output_handles[0] = buf0.release();", "output_handles[0] = int_array_0.release();"),
])
def test_what_the_plan_cannot_say_is_refused(change):
    old, new = change
    assert old in _BODY
    with pytest.raises(kernel_plan.Unsupported):
        kernel_plan.entry_unit(_wrapper(_BODY.replace(old, new)))


def test_a_wrapper_of_another_device_or_with_other_header_code_is_refused():
    with pytest.raises(kernel_plan.Unsupported):
        kernel_plan.entry_unit(_wrapper(header="#include <torch/csrc/inductor/cpp_wrapper/cuda.h>\n"))
    with pytest.raises(kernel_plan.Unsupported):
        kernel_plan.entry_unit(_wrapper(header="#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\n"
                                               "static int eagerc_other_helper() { return 1; }\n"))


_CHILD = r"""
import glob, json, os, sys, torch, eagerc
from eagerc.codegen.cpp import kernel_plan
torch.manual_seed(0)
x = torch.randn(8, 16); y = torch.randn(8, 16); w = torch.randn(16); z = torch.randn(8, 8)
calls = {
    "abs": lambda: torch.abs(x),
    "add_alpha": lambda: torch.add(x, y, alpha=2),           # a lifted scalar
    "softmax": lambda: torch.softmax(x, -1),                 # scratch temporaries
    "layer_norm": lambda: torch.nn.functional.layer_norm(x, (16,), w, w),
    "max_dim": lambda: torch.max(x, 1),                      # two outputs
    "mean": lambda: x.mean(),                                # a 0-dim output
    "addmm": lambda: torch.addmm(z, x, y.t()),               # an extern call: glue
}
eager = {name: call() for name, call in calls.items()}
eagerc.enable("cpu")
report = {"close": {}}
results = {}
for name, call in calls.items():
    got, want = call(), eager[name]
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    # Inductor's reductions may round otherwise than eager's: close, same strides and dtypes
    # (the test compares plan-built and wrapper-built results bit for bit).
    report["close"][name] = all(torch.allclose(g, e, rtol=1.3e-6, atol=1e-5) and g.stride() == e.stride()
                                and g.dtype == e.dtype for g, e in zip(got, want))
    results[name] = list(got)
inplace = x.clone(); expected = x.clone().add_(y)
inplace.add_(y)                                              # no output: writes an input
report["close"]["add_"] = bool(torch.equal(inplace, expected))
results["add_"] = [inplace]
torch.save(results, os.environ["EAGERC_TEST_RESULTS"])
s = eagerc.stats()
report.update(compiles=s["compiles"], disk_loads=s["disk_loads"], counts=kernel_plan.counts,
              reasons=dict(kernel_plan.reasons))
root = os.environ["TORCHINDUCTOR_CACHE_DIR"]
report["plan_sources"] = len(glob.glob(f"{root}/**/*.plan.cpp", recursive=True))
libraries = {}
for so in glob.glob(f"{root}/**/*.main.so", recursive=True):
    planned = os.path.exists(so[:-len(".so")] + ".plan.cpp")
    with open(so, "rb") as f:
        data = f.read()
    libraries[so] = {"planned": planned, "wrapper": b"inductor_entry_impl" in data,
                     "borrowed": b"eagerc_entry_borrowed" in data}
report["libraries"] = libraries
print(json.dumps(report))
"""


def _run(env, results) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD], env=dict(env, EAGERC_TEST_RESULTS=str(results)),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _same(a, b) -> bool:
    import torch

    a, b = torch.load(a), torch.load(b)
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(torch.equal(x, y) and x.stride() == y.stride() for x, y in zip(a[k], b[k]))
        for k in a)


@pytest.mark.skipif(not one_unit.enabled(), reason="no clang++ here, or EAGERC_ONE_UNIT=0")
def test_kernels_build_without_their_wrapper_and_reload_from_disk(tmp_path):
    env = dict(os.environ, EAGERC_COMPILE="now", EAGERC_CACHE_DIR=str(tmp_path / "cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env.pop(kernel_plan.ENV, None)
    first = _run(env, tmp_path / "first.pt")
    if first["counts"]["plan"] == 0 and not first["plan_sources"]:
        pytest.skip("clang cannot build on cpp_prefix.h's precompiled header here")
    assert all(first["close"].values()), first["close"]
    assert first["compiles"] >= 8
    # Every elementwise, reduction and multi-output kernel had a plan (addmm, one extern
    # call, is glue: built as before).
    assert first["counts"]["plan"] >= 7 and first["counts"]["no_plan"] == 0, first
    planned = [lib for lib in first["libraries"].values() if lib["planned"]]
    assert len(planned) == first["counts"]["plan"]
    assert all(not lib["wrapper"] and lib["borrowed"] for lib in planned)
    # A fresh process loads every kernel from disk, the plan-built ones too, and computes the same.
    second = _run(env, tmp_path / "second.pt")
    assert second["compiles"] == 0 and second["disk_loads"] >= first["compiles"] - 1
    assert _same(tmp_path / "first.pt", tmp_path / "second.pt")
    # The same kernels with their wrappers compiled (fresh caches): bit for bit the same results.
    off = _run(dict(env, EAGERC_CPU_PLAN="0", EAGERC_CACHE_DIR=str(tmp_path / "cache_off"),
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor_off")), tmp_path / "off.pt")
    assert off["counts"]["plan"] == 0 and off["plan_sources"] == 0 and off["compiles"] == first["compiles"]
    assert _same(tmp_path / "first.pt", tmp_path / "off.pt")


@pytest.fixture
def fresh_inductor(fresh_cache, tmp_path, monkeypatch):
    from torch._inductor import codecache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(codecache.CppWrapperCodeCache, "cache", {})
    monkeypatch.delenv(kernel_plan.ENV, raising=False)
    monkeypatch.setattr(kernel_plan, "counts", {"plan": 0, "no_plan": 0})
    monkeypatch.setattr(kernel_plan, "reasons", collections.Counter())
    return tmp_path


@pytest.mark.skipif(not one_unit.enabled(), reason="no clang++ here, or EAGERC_ONE_UNIT=0")
def test_a_plan_built_library_imports_and_its_python_entry_refuses(fresh_inductor):
    import torch

    import eagerc

    with eagerc.enabled("cpu", ops=["aten::exp"]):
        torch.exp(torch.randn(5))
    if kernel_plan.counts["plan"] == 0:
        pytest.skip("clang cannot build on cpp_prefix.h's precompiled header here")
    (library,) = [so for so in (fresh_inductor / "inductor").rglob("*.main.so")
                  if so.with_name(so.name[:-len(".so")] + ".plan.cpp").exists()]
    spec = importlib.util.spec_from_file_location("eagerc_plan_probe.inductor_entry_cpp", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(RuntimeError, match="eagerc's kernel holder calls this library"):
        module.inductor_entry_cpp([])
    sys.modules.pop("eagerc_plan_probe.inductor_entry_cpp", None)


@pytest.mark.skipif(not one_unit.enabled(), reason="no clang++ here, or EAGERC_ONE_UNIT=0")
def test_the_off_switch_builds_the_wrapper(fresh_inductor, monkeypatch):
    import torch

    import eagerc

    monkeypatch.setenv(kernel_plan.ENV, "0")
    x = torch.randn(6)
    with eagerc.enabled("cpu", ops=["aten::neg"]):
        assert torch.equal(torch.neg(x), -x)
    assert kernel_plan.counts == {"plan": 0, "no_plan": 0}
    assert not list((fresh_inductor / "inductor").rglob("*.plan.cpp"))


@pytest.mark.skipif(not one_unit.enabled(), reason="no clang++ here, or EAGERC_ONE_UNIT=0")
@pytest.mark.parametrize("refusal", ["unsupported", "does not compile"])
def test_a_wrapper_without_a_plan_is_built_whole(fresh_inductor, monkeypatch, refusal):
    import torch

    import eagerc

    def entry_unit(code):
        if refusal == "unsupported":
            raise kernel_plan.Unsupported("a statement the plan does not say")
        return "this is not C++;\n"  # clang refuses the plan's unit: the full one is built

    monkeypatch.setattr(kernel_plan, "entry_unit", entry_unit)
    x = torch.randn(7, 3)
    with eagerc.enabled("cpu", ops=["aten::sigmoid"]):
        assert torch.allclose(torch.sigmoid(x), 1 / (1 + torch.exp(-x)))
    assert eagerc.stats()["ops"]["aten::sigmoid@CPU"]["compiles"] == 1
    assert kernel_plan.counts["plan"] == 0
    if refusal == "unsupported":
        assert kernel_plan.counts["no_plan"] == 1
    else:
        assert kernel_plan.reasons["its unit did not build"] == 1
    (library,) = (fresh_inductor / "inductor").rglob("*.main.so")
    data = library.read_bytes()
    assert b"inductor_entry_impl" in data and b"eagerc_entry_borrowed" not in data
