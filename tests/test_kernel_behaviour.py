"""Behaviour of the per-op compiled-kernel path: what compiles, what hits, what persists.

Counts, not seconds: one compile for many sizes and scalar values, zero compiles in a
fresh process, hits that never enter Python, broken cache entries rebuilt.
"""
from __future__ import annotations

import glob
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import eagerc
from eagerc import _C
from eagerc.testing import assert_close

ABS = "aten::abs@CPU"
ADD = "aten::add.Tensor@CPU"


def op_stats(name):
    return eagerc.stats()["ops"].get(name, {"hits": 0, "misses": 0, "compiles": 0, "fallbacks": 0})


def test_new_sizes_reuse_one_kernel(fresh_cache):
    inputs = [torch.randn(n, n + 3) for n in (2, 3, 5, 8, 13, 21, 34, 55, 89, 144)]
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        outputs = [torch.abs(x) for x in inputs]
    for x, y in zip(inputs, outputs):
        assert_close(y, x.abs())
    s = op_stats(ABS)
    assert s["compiles"] == 1
    assert s["hits"] == 9 and s["misses"] == 1 and s["fallbacks"] == 0


def test_scalar_values_are_runtime_inputs(fresh_cache):
    x, y = torch.randn(16, 16), torch.randn(16, 16)
    expected = {a: x + a * y for a in (0.5, 2.0, -3.25, 7.0, 1e-3)}
    with eagerc.enabled("cpu", ops=["aten::add.Tensor"]):
        got = {alpha: torch.add(x, y, alpha=alpha) for alpha in expected}
    for alpha, want in expected.items():
        assert_close(got[alpha], want)
    assert op_stats(ADD)["compiles"] == 1
    assert op_stats(ADD)["hits"] == 4


def test_stride_of_a_size_one_dim_is_not_guarded(fresh_cache):
    # A [1, n] row sliced from a [1, 512] buffer (stride 512, as BERT's position ids) and
    # a fresh [1, n] row are the same call: the kernel compiled from either serves both.
    weight = torch.randn(512, 8)
    buffer = torch.arange(512).reshape(1, 512)
    rows = [torch.randint(0, 512, (1, 16)), buffer[:, :16], buffer[:, :16].expand(1, 16)]
    with eagerc.enabled("cpu", ops=["aten::embedding"]):
        got = [torch.nn.functional.embedding(r, weight) for r in rows * 2]
    for r, y in zip(rows * 2, got):
        assert_close(y, weight[r])
    s = op_stats("aten::embedding@CPU")
    assert s["compiles"] == 1 and s["misses"] == 1 and s["hits"] == 5


def test_broadcast_guard_rejects_other_shapes(fresh_cache):
    # The kernel for [s0,s1] + [s0,s1] assumes equal sizes; a broadcasting call must
    # not run it (a guard fails, a second variant is compiled).
    with eagerc.enabled("cpu", ops=["aten::add.Tensor"]):
        a, b = torch.randn(4, 6), torch.randn(4, 6)
        first = a + b
        c = torch.randn(3, 6)
        with pytest.raises(RuntimeError, match="size"):
            a + c  # native raises; eagerc must not read out of bounds
    assert_close(first, a.add(b))


def test_hits_never_enter_python(fresh_cache):
    x = torch.randn(64, 64)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)  # miss: compiles
        calls_before = _C._resolver_calls()
        python_calls = []
        abs_ = torch.abs

        def profiler(frame, event, arg):
            if event == "call":  # a Python function started (C calls are c_call)
                python_calls.append(frame.f_code.co_name)

        sys.setprofile(profiler)
        try:
            for _ in range(1000):
                abs_(x)
        finally:
            sys.setprofile(None)
    assert python_calls == []
    assert _C._resolver_calls() == calls_before
    assert op_stats(ABS)["hits"] == 1000


def test_concurrent_misses_compile_once(fresh_cache):
    x = torch.randn(32, 8)
    results, errors = [], []

    def worker():
        try:
            results.append(torch.abs(x))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    with eagerc.enabled("cpu", ops=["aten::abs"]):
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    for r in results:
        assert_close(r, x.abs())
    assert op_stats(ABS)["compiles"] == 1


FRESH_PROCESS = textwrap.dedent("""
    import torch, eagerc
    x = torch.randn(40, 24)
    with eagerc.enabled("cpu", ops=["aten::abs", "aten::add.Tensor"]):
        a = torch.abs(x); b = torch.add(x, x, alpha=3)
    torch.testing.assert_close(a, x.abs()); torch.testing.assert_close(b, x * 4)
    s = eagerc.stats()
    print(s["compiles"], s["disk_loads"], s["fallbacks"])
""")


def _run_fresh_process(cache_dir):
    env = dict(os.environ, EAGERC_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return tuple(int(v) for v in out.stdout.split())


@pytest.mark.slow
def test_fresh_process_compiles_nothing(fresh_cache):
    assert _run_fresh_process(fresh_cache) == (2, 0, 0)
    assert _run_fresh_process(fresh_cache) == (0, 2, 0)


def test_corrupt_artifact_is_evicted_and_rebuilt(fresh_cache, caplog):
    x = torch.randn(8, 8)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
    artifacts = glob.glob(str(fresh_cache / "**" / "*.so"), recursive=True)
    assert len(artifacts) == 1
    # A new file, not an in-place write: this process still maps the old one.
    os.remove(artifacts[0])
    with open(artifacts[0], "wb") as f:
        f.write(b"garbage, not a shared library")
    # A fresh L1 and store: the next miss reads the broken entry from disk.
    from eagerc.cache import service

    _C._clear_tables()
    service().reset()
    eagerc.reset_stats()
    with caplog.at_level(logging.WARNING), eagerc.enabled("cpu", ops=["aten::abs"]):
        y = torch.abs(x)
    assert_close(y, x.abs())
    assert op_stats(ABS)["compiles"] == 1
    assert op_stats(ABS)["fallbacks"] == 0
    assert any("evicted" in r.getMessage() for r in caplog.records)


def test_compile_is_logged_with_op_signature_and_time(fresh_cache, caplog):
    with caplog.at_level(logging.INFO, logger="eagerc"), eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(5, 7))
    messages = [r.getMessage() for r in caplog.records if r.name == "eagerc"]
    assert any("compiled aten::abs(float32[s,s] C)" in m and " s" in m for m in messages), messages


def test_disable_restores_native_kernels(fresh_cache):
    x = torch.randn(6, 6)
    eagerc.enable("cpu", ops=["aten::abs"])
    torch.abs(x)
    eagerc.disable("cpu")
    eagerc.reset_stats()
    y = torch.abs(x)
    assert_close(y, x.sign() * x)
    assert op_stats(ABS)["hits"] == 0 and op_stats(ABS)["misses"] == 0


def test_stats_keys(fresh_cache):
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(3, 3))
    s = eagerc.stats()
    for key in ("hits", "misses", "compiles", "disk_loads", "fallbacks", "compile_seconds", "ops"):
        assert key in s
    assert s["compiles"] == 1 and s["compile_seconds"] > 0
    eagerc.reset_stats()
    assert eagerc.stats()["misses"] == 0


def test_unknown_device_and_op_errors_name_the_fix():
    with pytest.raises(ValueError, match="Known targets"):
        eagerc.enable("tpu")
    with pytest.raises(ValueError, match="no such operator"):
        eagerc.enable("cpu", ops=["aten::not_an_op"])
    with pytest.raises(ValueError, match="device runtime"):
        eagerc.enable("cpu", ops=["aten::copy_"])
    eagerc.disable("cpu")


@pytest.mark.parametrize("device", ["cpu", "eagerc"])
def test_a_miss_updates_batch_norm_running_stats_once(fresh_cache, device):
    """native_batch_norm writes running_mean/var without marking them in its schema. The
    eager check on a miss must run on copies of them too: it used to update the caller's
    running stats a second time (override mode; a GPU-memory device as well)."""
    torch.manual_seed(0)
    x = torch.randn(4, 8, 6, 6)
    reference = torch.nn.BatchNorm2d(8).train()
    bn = torch.nn.BatchNorm2d(8).train()
    for _ in range(2):  # a miss (check + compile + run), then a hit
        reference(x)
        if device == "cpu":
            with eagerc.enabled("cpu"):
                bn(x)
        else:
            bn = bn.to("eagerc")
            bn(x.to("eagerc"))
    assert op_stats(f"aten::native_batch_norm@{'CPU' if device == 'cpu' else 'PrivateUse1'}")["hits"] >= 1
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(getattr(bn, name).cpu(), getattr(reference, name), msg=name)


_MORE_THREADS = textwrap.dedent("""
    import os, torch, eagerc
    # Inductor's default: as many threads as cores. Its `omp parallel` then takes the
    # caller's thread count at run time (a fixed count is written only when they differ).
    torch.set_num_threads(os.cpu_count())
    x = torch.randn(1 << 22).double()
    rows = x.view(64, -1)
    with eagerc.enabled("cpu", ops=["aten::sum", "aten::sum.dim_IntList"]):
        compiled = x.sum(), rows.sum(1)  # parallel reductions
        for threads in (2 * os.cpu_count(), 8 * os.cpu_count()):
            torch.set_num_threads(threads)
            assert torch.allclose(x.sum(), compiled[0]) and torch.allclose(rows.sum(1), compiled[1])
        print("OK", eagerc.stats()["fallbacks"])
""")


@pytest.mark.slow  # compiles and runs in subprocesses: 113 s on a busy 2-core machine
def test_parallel_kernel_runs_under_more_threads_than_it_was_compiled_with(fresh_cache):
    """A parallel reduction compiled under one thread count, then run (in that process, or
    loaded by a process or machine with more cores) under more: its per-thread buffers are
    sized at run time. Sized at compile time they were overrun (SIGSEGV). In a subprocess:
    a crash kills only it; the second process loads the kernels from disk."""
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _MORE_THREADS], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "OK 0" in done.stdout, (done.returncode, done.stderr[-2000:])
