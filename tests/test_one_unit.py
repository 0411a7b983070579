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
    assert on != off and on.endswith("|one-unit") and off == clang_units.identity()
    monkeypatch.setattr(clang_units, "_compiler", "")  # EAGERC_CLANG=0: g++ builds all
    monkeypatch.delenv(one_unit.ENV)
    assert CPP.compiler_settings()["units"] == "g++"
