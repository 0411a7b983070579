"""A CPU kernel's library built by one clang process (eagerc/codegen/cpp/one_unit.py): one
compiler process per kernel, on a precompiled header, linked in the same invocation; the
three-step build where it does not apply; the choice in the cache key. Counts, not
seconds: tools/bench_cold.py --compile measures the time."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagerc.codegen.cpp import clang_units, one_unit

_CHILD = r"""
import json, subprocess, torch, eagerc
from eagerc.codegen.cpp import one_unit
x = torch.randn(8, 16); y = torch.randn(8, 16)
eager = {"abs": torch.abs(x), "add": torch.add(x, y, alpha=2)}
started = []
original = subprocess.Popen.__init__
def record(self, args, *a, **k):
    started.append(args if isinstance(args, str) else " ".join(map(str, args)))
    return original(self, args, *a, **k)
subprocess.Popen.__init__ = record
eagerc.enable("cpu")
torch.neg(x)  # the first compile of the process: precompiled headers, probes
report = {}
for name, call in (("abs", lambda: torch.abs(x)), ("add", lambda: torch.add(x, y, alpha=2))):
    del started[:]
    out = call()
    report[name] = {"processes": list(started), "equal": bool(torch.equal(out, eager[name]))}
report["counts"] = one_unit.counts
report["compiles"] = eagerc.stats()["compiles"]
print(json.dumps(report))
"""


@pytest.mark.skipif(not one_unit.enabled(), reason="no clang++ here, or EAGERC_ONE_UNIT=0")
def test_one_compiler_process_per_kernel_on_a_precompiled_header(tmp_path):
    env = dict(os.environ, EAGERC_COMPILE="now", EAGERC_CACHE_DIR=str(tmp_path / "cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["counts"]["one_unit"] == 0:
        pytest.skip("clang cannot build the precompiled header here (no omp.h it can parse)")
    assert report["compiles"] == 3 and report["counts"] == {"one_unit": 3, "declined": 0}
    for name in ("abs", "add"):
        (line,) = report[name]["processes"]  # one process: no separate compiles, no link step
        words = line.split()
        assert words[0] == clang_units.compiler()
        assert "-include-pch" in words and "-shared" in words and "-c" not in words
        assert words[words.index("-include-pch") + 1].endswith(".pch")
        assert not any(w.startswith("-g") for w in words)  # no debug info
        assert report[name]["equal"], name


def test_a_parallel_kernel_keeps_the_three_steps():
    assert clang_units.has_openmp("void k() {\n  #pragma omp parallel\n  {}\n}")
    assert not clang_units.has_openmp("void k() { /* pragma omp in a comment */ }")


def test_the_choice_is_in_the_cache_key(monkeypatch):
    from eagerc.codegen.cpp.generator import CPP

    monkeypatch.setattr(clang_units, "_compiler", "/usr/bin/true")
    monkeypatch.delenv(one_unit.ENV, raising=False)
    on = CPP.compiler_settings()["units"]
    monkeypatch.setenv(one_unit.ENV, "0")
    off = CPP.compiler_settings()["units"]
    assert on != off and "|one-unit" in on and off == clang_units.identity()
    monkeypatch.setattr(clang_units, "_compiler", "")  # EAGERC_CLANG=0: g++ builds all
    monkeypatch.delenv(one_unit.ENV)
    assert CPP.compiler_settings()["units"] == "g++"


def _cpp_prefix():
    import torch

    with open(os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc", "inductor",
                           "cpp_prefix.h")) as f:
        return f.read()


_KERNEL = """extern "C" void cpp_fused_0(const int64_t* in_ptr0, int64_t* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    out_ptr0[0] = BODY;
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
"""


def test_the_integer_division_check_goes_only_where_nothing_can_set_it():
    from eagerc.codegen.cpp.division_check import noting_names, without_dead_check

    header = _cpp_prefix()
    if "inductor_cpu_note_integer_div_by_zero" not in header:
        pytest.skip("this torch's kernels check integer division otherwise")
    # Read from the header: the helpers Inductor's kernels call for // and %.
    assert {"floor_divide_integral", "mod", "remainder_integral"} <= noting_names(header)
    plain = _KERNEL.replace("BODY", "std::abs(in_ptr0[0])")
    assert "inductor_cpu_throw_if_integer_div_error" not in without_dead_check(plain, header)
    for body in ("floor_divide_integral(in_ptr0[0], in_ptr0[1])", "mod(in_ptr0[0], 7L)",
                 "remainder_integral(in_ptr0[0], in_ptr0[1])"):
        kernel = _KERNEL.replace("BODY", body)
        assert without_dead_check(kernel, header) == kernel, body
    # A header whose noting functions cannot be told (a macro notes): every check stays.
    macro = ("inline void inductor_cpu_note_integer_div_by_zero() {}\n"
             "#define NOTE_ZERO() inductor_cpu_note_integer_div_by_zero()\n")
    assert without_dead_check(plain, macro) == plain


def test_a_wrappers_stolen_inputs_go_into_an_array():
    from eagerc.codegen.cpp.input_array import inputs_as_array

    code = ("    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 2);\n"
            "    auto arg0_1 = std::move(inputs[0]);\n    auto arg1_1 = std::move(inputs[1]);\n")
    out = inputs_as_array(code)
    assert "steal_from_raw_handles_to_raii_handles" not in out
    assert ("RAIIAtenTensorHandle inputs[2] = {RAIIAtenTensorHandle(input_handles[0]), "
            "RAIIAtenTensorHandle(input_handles[1])};") in out
    # AOTInductor's wrapper clears the vector: left as it is.
    assert inputs_as_array(code + "    inputs.clear();\n") == code + "    inputs.clear();\n"
