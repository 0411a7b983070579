"""Two GPUs of one host (override mode on CUDA): the device index is part of every signature.

Skipped unless torch sees two CUDA GPUs; run on the GPU machine by tools/gpu_check.sh.
Each index gets its own kernel, whose device guard, allocations, current stream and loaded
CUDA module are that GPU's, whichever device is current when it is called, in the process
that compiled it and in a new one that loads it from the kernel cache.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc
from eagerc import _C
from eagerc.testing import assert_close

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")]

OPS = ["aten::abs", "aten::sum.dim_IntList", "aten::_softmax", "aten::mm", "aten::add.Tensor"]
CALLS = [torch.abs, lambda x: x.sum(1), lambda x: torch.softmax(x, 1), lambda x: x @ x.t(),
         lambda x: torch.add(x, x.flip(0), alpha=3)]


def run_all(xs):
    return [[fn(x) for fn in CALLS] for x in xs]


def test_each_device_index_compiles_its_own_kernel(fresh_cache):
    from eagerc.codegen.triton import plan_build

    xs = [torch.randn(33, 65, device=f"cuda:{i}") for i in (0, 1)]
    expected = run_all(xs)
    assert torch.cuda.current_device() == 0
    with eagerc.enabled("cuda", ops=OPS):
        got = run_all(xs)
        compiles = eagerc.stats()["compiles"]
        calls = _C._resolver_calls()
        again = run_all(xs)  # hits, each index its own kernel, no Python
        assert _C._resolver_calls() == calls
    for x, g, a, want in zip(xs, got, again, expected):
        for gi, ai, wi in zip(g, a, want):
            assert gi.device == ai.device == x.device
            assert_close(gi, wi)
            assert_close(ai, wi)
    assert compiles == 2 * len(OPS) and eagerc.stats()["fallbacks"] == 0
    # Every stored artifact (content-addressed: one file per distinct build) is a plan. Not
    # plan_build.counts: a wrapper another test process already built is not built again.
    artifacts = list(fresh_cache.rglob("artifacts/*.so"))
    assert artifacts and all(plan_build.is_plan_artifact(a.read_bytes()) for a in artifacts), plan_build.reasons


def test_kernels_on_the_other_gpu_run_on_its_current_stream(fresh_cache):
    x = torch.randn(4096, 4096, device="cuda:1")
    with eagerc.enabled("cuda", ops=["aten::abs"]):
        torch.abs(x)  # compiled for cuda:1
        with torch.cuda.device(0):  # the current device is the other one
            side = torch.cuda.Stream(device=1)
            side.wait_stream(torch.cuda.current_stream(1))
            with torch.cuda.stream(side):
                torch.cuda._sleep(200_000_000)  # cuda:1's side stream is busy for ~0.1 s
                x.fill_(-2.0)                   # native, on that stream
                y = torch.abs(x)                # must run after the fill, on the same stream
            side.synchronize()
    assert y.device == x.device
    assert bool((y == 2.0).all())


def test_mixed_devices_raise_what_native_raises(fresh_cache):
    a, b = torch.randn(8, 8, device="cuda:0"), torch.randn(8, 8, device="cuda:1")
    with pytest.raises(RuntimeError) as native:
        torch.add(a, b)
    with eagerc.enabled("cuda", ops=["aten::add.Tensor"]):
        torch.add(a, a)  # a compiled kernel for cuda:0 exists
        with pytest.raises(type(native.value)) as ours:
            torch.add(a, b)
    assert str(ours.value) == str(native.value)


def test_a_new_process_loads_each_gpus_kernels(fresh_cache):
    # The second process compiles nothing: each artifact loads its CUDA module in its own
    # GPU's context while the other GPU is current.
    script = textwrap.dedent("""
        import faulthandler; faulthandler.dump_traceback_later(240, exit=True)
        import torch, eagerc
        xs = {i: torch.arange(-24.0, 24.0, device=f"cuda:{i}").reshape(6, 8) for i in (0, 1)}
        with eagerc.enabled("cuda", ops=["aten::abs", "aten::mm", "aten::_softmax"]):
            got = {}
            for i, other in ((1, 0), (0, 1)):
                with torch.cuda.device(other):
                    x = xs[i]
                    got[i] = (torch.abs(x), x @ x.t(), torch.softmax(x, 1))
        for i, (a, m, s) in got.items():
            x = xs[i]
            assert a.device == x.device and torch.equal(a, x.abs()), (i, a)
            assert torch.allclose(m, x @ x.t()), i
            assert torch.allclose(s, torch.softmax(x, 1)), i
        st = eagerc.stats()
        print("COMPILES", st["compiles"], "LOADS", sum(v.get("disk_loads", 0) for v in st["ops"].values()),
              "FALLBACKS", st["fallbacks"])
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-6000:]
        runs.append(r.stdout)
    counts = [r.strip().splitlines()[-1].split() for r in runs]
    first, second = (dict(zip(c[::2], map(int, c[1::2]))) for c in counts)
    # abs, mm and softmax, once per GPU (softmax.int is composite: _softmax is what compiles)
    assert first == {"COMPILES": 6, "LOADS": 0, "FALLBACKS": 0}, runs[0]
    assert second == {"COMPILES": 0, "LOADS": 6, "FALLBACKS": 0}, runs[1]
