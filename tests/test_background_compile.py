"""Background compilation (eagerc/per_op/background.py): a miss is served at once by a kernel
that exists (the device's own in override mode; ATen's CPU kernel on aliases on the
eagerc device) while its own compiles on a background thread; results are right at every
moment, later calls hit the compiled kernel, and an exit mid-compile breaks nothing."""
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


@pytest.fixture
def background_cpu(fresh_cache):
    eagerc.enable("cpu", ops=["aten::_softmax", "aten::add.Tensor", "aten::mul.Tensor"],
                  compile="background")
    yield
    eagerc.wait_compiles()
    eagerc.disable("cpu")
    from eagerc.per_op import background

    background.set_mode("cpu", None)


def test_override_mode_serves_natively_then_hits(background_cpu):
    # Results are compared after eagerc.disable: comparing runs served ops too.
    x, y = torch.randn(40, 50), torch.randn(40, 50)
    first = torch.softmax(x, -1)                       # served by the CPU's own kernel
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["interim"] == 1 and s["fallbacks"] == 0 and s["compiles"] == 0
    eagerc.wait_compiles()
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["background_compiles"] == 1 and s["compiles"] == 1, s
    second = torch.softmax(x, -1)                      # the kernel made ready, into L1: a hit
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["hits"] == 1 and s["misses"] == 1 and s["disk_loads"] == 0, s
    small = torch.randn(7, 50)
    before = _C._resolver_calls()
    third = torch.softmax(small, -1)                   # another size: a hit, no Python
    assert _C._resolver_calls() == before
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["interim"] == 1 and s["disk_loads"] == 0 and s["hits"] == 2 and s["misses"] == 1, s
    # Scalars are runtime inputs in background mode too: one kernel for every alpha.
    sums = {alpha: torch.add(x, y, alpha=alpha) for alpha in (2.0, 3.5, -1.5)}
    eagerc.wait_compiles()
    s = eagerc.stats()["ops"]["aten::add.Tensor@CPU"]
    assert s["background_compiles"] == 1 and s["compiles"] == 1, s
    eagerc.disable("cpu")
    for got in (first, second):
        assert_close(got, torch.softmax(x, -1))
    assert_close(third, torch.softmax(small, -1))
    for alpha, got in sums.items():
        assert_close(got, torch.add(x, y, alpha=alpha))


def test_a_kernel_made_ready_serves_only_its_own_cache(background_cpu, tmp_path, monkeypatch):
    from eagerc.cache import service

    x = torch.randn(40, 50)
    torch.softmax(x, -1)
    eagerc.wait_compiles()
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "another-cache"))
    service().reset()
    _C._clear_tables()
    eagerc.reset_stats()
    torch.softmax(x, -1)                   # an empty cache: compiled for it, in the background
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["interim"] == 1 and s["hits"] == 0, s
    eagerc.wait_compiles()
    assert eagerc.stats()["ops"]["aten::_softmax@CPU"]["compiles"] == 1
    assert any((tmp_path / "another-cache").iterdir())


def test_a_queued_kernel_is_compiled_once(background_cpu):
    x = torch.randn(30, 30)
    outs = [torch.mul(x, x) for _ in range(5)]   # all before the compile finishes, or some after
    eagerc.wait_compiles()
    s = eagerc.stats()["ops"]["aten::mul.Tensor@CPU"]
    assert s["compiles"] == 1 and s["background_compiles"] == 1
    eagerc.disable("cpu")
    for out in outs:
        assert_close(out, x * x)


@pytest.mark.slow
def test_eagerc_device_first_run_is_right_while_compiling(fresh_cache, tiny_bert):
    from eagerc.per_op import background

    model, device_model = tiny_bert(), tiny_bert().to("eagerc")
    ids = torch.randint(0, 100, (2, 12))
    eagerc.enable("eagerc", compile="background")
    try:
        with torch.no_grad():
            want = model(ids).last_hidden_state
            first = device_model(ids.to("eagerc")).last_hidden_state.cpu()
            assert_close(first, want)
            assert eagerc.stats()["interim"] > 0
            eagerc.wait_compiles()
            assert eagerc.stats()["background_compiles"] > 0
            # Kernels that call ATen (mm, bmm, CPU flash attention) run on CPU aliases,
            # whose own signature a second run meets first; from the third run on,
            # everything is compiled.
            second = device_model(ids.to("eagerc")).last_hidden_state.cpu()
            eagerc.wait_compiles()
            settled = eagerc.stats()
            third = device_model(ids.to("eagerc")).last_hidden_state.cpu()
        for out in (second, third):
            assert_close(out, want)
        s = eagerc.stats()
        assert s["interim"] == settled["interim"] and s["compiles"] == settled["compiles"]
    finally:
        eagerc.wait_compiles()
        background.set_mode("eagerc", None)


@pytest.mark.slow
def test_exit_with_compiles_pending_leaves_no_broken_entry(tmp_path):
    child = textwrap.dedent("""
        import torch, eagerc, eagerc.per_op.background
        x = torch.randn(64, 64)
        eagerc.enable("cpu", compile="background")
        outs = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0), torch.softmax(x, 0),
                torch.log1p(x.abs()), torch.erf(x), x.amax(1)]
        print(eagerc.per_op.background.compiler().pending())
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) > 0   # it exited with compiles still queued
    v = subprocess.run([sys.executable, "-m", "kernel_cache", "--dir", str(tmp_path / "cache"), "verify"],
                       capture_output=True, text=True, timeout=300)
    assert v.returncode == 0 and "0 broken evicted, 0 broken left in place" in v.stdout, v.stdout
    again = textwrap.dedent("""
        import torch, eagerc, eagerc.per_op.background
        x = torch.randn(64, 64)
        with eagerc.enabled("cpu"):
            got = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0)]
        want = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0)]
        print(all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want)))
    """)
    r = subprocess.run([sys.executable, "-c", again], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.split()[-1] == "True", r.stderr[-3000:]


def test_mode_from_the_environment(monkeypatch):
    from eagerc.per_op import background

    monkeypatch.setenv("EAGERC_COMPILE", "background")
    assert background.is_background("some-device")
    monkeypatch.setenv("EAGERC_COMPILE", "later")
    with pytest.raises(ValueError, match="EAGERC_COMPILE='later'"):
        background.is_background("some-device")
    with pytest.raises(ValueError, match="compile='soon'"):
        eagerc.enable("cpu", ops=["aten::abs"], compile="soon")
