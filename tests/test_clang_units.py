"""CPU compile units built by clang where it is installed (eagerc/codegen/cpp/clang_units.py):
the g++ command line becomes clang's, parallel kernels stay with g++, EAGERC_CLANG=0 turns
it off, and kernels built by clang give the same bits as those built by g++ (and results
equal to eager). Behaviour only; tools/bench_cold.py measures the time."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagerc.codegen.cpp import clang_units

GCC_KERNEL_LINE = (
    "g++ /c/k/ck.optimized.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D CPU_CAPABILITY_AVX512 -O3 -DNDEBUG "
    "-g1 -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC "
    "-std=c++20 -fopenmp -include /h/c36.h -I/t/include -mavx512f -c -o /c/k/ck.optimized.o -w")


def test_a_gcc_compile_line_becomes_clangs():
    words, header, source = clang_units.clang_words(GCC_KERNEL_LINE)
    assert header == "/h/c36.h" and source == "/c/k/ck.optimized.cpp"
    # Same optimisation and floating-point words; g++'s loop vectoriser switch in clang's
    # spelling; OpenMP and x87 precision dropped (only units without OpenMP come here).
    for word in ("-O3", "-ffp-contract=off", "-march=native", "-mavx512f", "-std=c++20", "-g1"):
        assert word in words
    assert "-fno-vectorize" in words
    assert not {"-fno-tree-loop-vectorize", "-fexcess-precision=fast", "-fopenmp"} & set(words)
    assert words[-4:] == ["-c", "-o", "/c/k/ck.optimized.o", "-w"]
    # The precompiled header is built with the flags alone.
    flags = clang_units._flags(words, header, source)
    assert not {"-c", "-o", "-include", source, header, "/c/k/ck.optimized.o"} & set(flags)


def test_lines_that_are_not_one_compile_with_a_forced_include_stay_with_gcc():
    link = "g++ /c/a.o /c/b.o -shared -fPIC -o /c/a.so -ltorch"
    assert clang_units.clang_words(link) is None
    assert clang_units.clang_words(GCC_KERNEL_LINE.replace("-include /h/c36.h ", "")) is None


def test_eagerc_clang_0_turns_it_off(monkeypatch):
    monkeypatch.setattr(clang_units, "_compiler", None)
    monkeypatch.setenv(clang_units.ENV, "0")
    assert clang_units.compiler() is None and clang_units.identity() == ""
    monkeypatch.setattr(clang_units, "_compiler", None)
    monkeypatch.setenv(clang_units.ENV, "no-such-clang++")
    assert clang_units.compiler() is None


_CHILD = r"""
import json, sys, torch, eagerc
from eagerc.codegen.cpp import clang_units, one_unit
g = torch.Generator().manual_seed(0)
x = torch.randn(33, 47, generator=g); y = torch.randn(33, 47, generator=g)
i = torch.randint(-50, 50, (33, 47), generator=g)
big = torch.randn(512, 1024, generator=g)
calls = {
    "softmax": lambda: torch.softmax(x, -1),
    "gelu_tanh": lambda: torch.nn.functional.gelu(x, approximate="tanh"),
    "pow": lambda: torch.pow(x.abs(), y),
    "layer_norm": lambda: torch.nn.functional.layer_norm(x, (47,)),
    "erf_f64": lambda: torch.erf(x.double()),
    "exp_bf16": lambda: torch.exp(x.bfloat16()),
    "floor_div_i64": lambda: torch.div(i, 7, rounding_mode="floor"),
    "logsumexp": lambda: torch.logsumexp(x, 1),
    "exp_parallel": lambda: torch.exp(big),
}
eager = {k: f() for k, f in calls.items()}
torch.set_num_threads(2)
with eagerc.enabled("cpu"):
    out = {k: f() for k, f in calls.items()}
from eagerc.testing import assert_close
for k in calls:
    assert_close(out[k], eager[k], equal_nan=True)
torch.save(out, sys.argv[1])
print(json.dumps({"counts": clang_units.counts, "one_unit": one_unit.counts,
                  "compiles": eagerc.stats()["compiles"]}))
"""


def _run(tmp_path, name, **env):
    out = tmp_path / f"{name}.pt"
    full = dict(os.environ, EAGERC_COMPILE="now", EAGERC_CACHE_DIR=str(tmp_path / f"{name}-cache"),
                TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"{name}-inductor"), **env)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(out)], env=full, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), out


@pytest.mark.slow  # minutes from empty caches: a vendor build, or 9 ops twice
@pytest.mark.skipif(clang_units.compiler() is None, reason="no clang++ on this machine")
def test_kernels_built_by_clang_give_the_bits_gcc_gives(tmp_path):
    import torch

    with_clang, clang_out = _run(tmp_path, "clang")
    if with_clang["counts"]["clang"] + with_clang["one_unit"]["one_unit"] == 0:
        pytest.skip("clang cannot build the precompiled header here (no omp.h it can parse: libomp-dev)")
    with_gcc, gcc_out = _run(tmp_path, "gcc", EAGERC_CLANG="0")
    assert with_gcc["counts"]["clang"] == with_gcc["one_unit"]["one_unit"] == 0
    assert with_clang["compiles"] == with_gcc["compiles"] >= 9
    # Every op's library in one clang process (one_unit.py) but the parallel kernel's: that
    # one has OpenMP pragmas, so g++ builds its kernel unit and clang its wrapper.
    assert with_clang["one_unit"]["one_unit"] >= 8 and with_clang["one_unit"]["declined"] >= 1
    assert with_clang["counts"]["gcc"] >= 1 and with_clang["counts"]["clang"] >= 1
    a, b = torch.load(clang_out), torch.load(gcc_out)
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(_bits(a[name]), _bits(b[name])), name


def _bits(t):
    import torch

    kind = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(-1).view(kind)


@pytest.mark.skipif(clang_units.compiler() is None, reason="no clang++ on this machine")
def test_a_precompiled_header_whose_header_changed_is_made_again(tmp_path, monkeypatch):
    from eagerc.codegen.cpp import glue_prelude

    monkeypatch.setattr(glue_prelude, "_header_dir", lambda: str(tmp_path / "headers"))
    header = tmp_path / "prefix.h"
    header.write_text("#pragma once\ninline int twice(int x) { return 2 * x; }\n")
    source = tmp_path / "unit.cpp"
    source.write_text('extern "C" int f(int x) { return twice(x); }\n')

    class Builder:
        def get_command_line(self):
            return f"g++ {source} -O2 -std=c++17 -include {header} -c -o {tmp_path / 'unit.o'}"

    assert clang_units.build(Builder())
    (pch,) = (tmp_path / "headers").glob("*.pch")
    later = header.stat().st_mtime + 10
    os.utime(header, (later, later))  # an update in place: clang refuses the old one
    assert not clang_units.build(Builder())  # (g++ builds this one)
    assert not pch.exists()
    assert clang_units.build(Builder()) and pch.exists()  # made again
