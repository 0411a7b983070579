"""Two indices of the eagerc device on GPU memory (EAGERC_BACKING=cuda): eagerc:0 and
eagerc:1, each on its GPU (eagerc:N's memory is cuda:N's), a compiled kernel per index,
the current device (torch.eagerc.set_device, torch.eagerc.device, CUDA's current device:
one and the same) and each GPU's current stream respected, copies between the indices and
to and from cuda:N and the CPU.

Skipped unless torch sees two CUDA GPUs (the device machine's two-GPU kinds, e.g.
nvidia-h100-x2, through tools/gpu_check.sh gpu-tests). The backing is chosen at import,
so each test runs a fresh process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")]


def run_on_gpu_device(script: str, cache) -> str:
    # Unbuffered, with faulthandler: a crash keeps the output so far and shows its stack.
    env = dict(os.environ, EAGERC_BACKING="cuda", EAGERC_CACHE_DIR=str(cache),
               PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_each_index_allocates_and_compiles_on_its_gpu(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        from eagerc import _C
        n = torch.cuda.device_count()
        assert torch.eagerc.device_count() == n == torch.accelerator.device_count() >= 2
        assert torch.eagerc.current_device() == 0 == torch.cuda.current_device()
        cpu = [torch.randn(512, 1024), torch.randn(512, 1024)]

        def run(x, y):
            return {"add": x + y, "softmax": torch.softmax(x, -1), "sum": x.sum(1),
                    "mm": x @ y.t()}

        want = run(*cpu)
        nbytes = 512 * 1024 * 4
        for i in (0, 1):
            before = [torch.cuda.memory_allocated(k) for k in (0, 1)]
            x, y = (t.to(f"eagerc:{i}") for t in cpu)
            grew = [torch.cuda.memory_allocated(k) - before[k] for k in (0, 1)]
            assert grew[i] >= 2 * nbytes and grew[1 - i] < nbytes, (i, grew)  # on cuda:i
            got = run(x, y)
            for k, v in got.items():
                assert v.device == torch.device("eagerc", i), (k, v.device)
                torch.testing.assert_close(v.cpu(), want[k], atol=1e-3, rtol=1e-4)
            # The current device stays 0: each kernel guards its own GPU and restores.
            assert torch.eagerc.current_device() == 0 == torch.cuda.current_device()
        s = eagerc.stats()
        assert s["fallbacks"] == 0, s
        for op in ("aten::add.Tensor", "aten::_softmax", "aten::sum.dim_IntList", "aten::mm"):
            got = s["ops"][op + "@PrivateUse1"]
            assert got["compiles"] + got.get("disk_loads", 0) == 2, (op, got)  # one per index
        calls = _C._resolver_calls()
        again = [run(*(t.to(f"eagerc:{i}") for t in cpu)) for i in (0, 1)]
        assert _C._resolver_calls() == calls  # hits, each index its own kernel
        for i, got in enumerate(again):
            for k, v in got.items():
                assert v.device == torch.device("eagerc", i)
                torch.testing.assert_close(v.cpu(), want[k], atol=1e-3, rtol=1e-4)

        # Copies: eagerc:0 <-> eagerc:1, to and from cuda:N and the CPU.
        x0 = cpu[0].to("eagerc:0")
        x1 = x0.to("eagerc:1")
        assert x1.device == torch.device("eagerc:1") and torch.equal(x1.cpu(), cpu[0])
        c0 = x1.to("cuda:0")
        assert c0.device == torch.device("cuda:0") and torch.equal(c0.cpu(), cpu[0])
        e0 = cpu[1].to("cuda:1").to("eagerc:0")
        assert e0.device == torch.device("eagerc:0") and torch.equal(e0.cpu(), cpu[1])
        back = (x1 * 3).to("eagerc:0", non_blocking=True)
        torch.eagerc.synchronize(0)
        assert torch.equal(back.cpu(), cpu[0] * 3)
        x1.copy_(e0)  # into an existing tensor on the other GPU
        assert torch.equal(x1.cpu(), cpu[1])
        # Mixed indices raise what native CUDA raises.
        try:
            cpu[0].to("cuda:0") + cpu[0].to("cuda:1")
        except RuntimeError as e:
            native = e
        try:
            x0 + x1
            raise AssertionError("eagerc:0 + eagerc:1 did not raise")
        except RuntimeError as e:
            assert type(e) is type(native) and "same device" in str(e), (e, native)
        print("OK", n)
    """, tmp_path / "cache")
    assert "OK" in out


def test_current_device_and_device_guard(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        n = torch.eagerc.device_count()
        eagerc1 = torch.device("eagerc", 1)
        torch.eagerc.set_device(1)
        print("set_device(1)")
        assert torch.cuda.current_device() == 1 == torch.accelerator.current_device_index()
        assert torch.empty(4, device="eagerc").device == eagerc1
        with torch.eagerc.device(0):
            assert torch.cuda.current_device() == 0 == torch.eagerc.current_device()
            assert torch.ones(3, device="eagerc").device == torch.device("eagerc", 0)
            print("guarded allocation and kernel")
        assert torch.eagerc.current_device() == 1
        with torch.cuda.device(0):
            assert torch.eagerc.current_device() == 0
        torch.eagerc.set_device(0)
        try:
            torch.eagerc.set_device(n)
            raise AssertionError("set a device that does not exist")
        except ValueError:
            pass
        gens = torch.eagerc.default_generators
        assert [g.device for g in gens] == [torch.device("eagerc", i) for i in range(n)]
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_kernels_on_the_other_gpu_run_on_its_current_stream(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        eagerc1 = torch.device("eagerc", 1)
        # Kernels on eagerc:1 run on cuda:1's current stream, whichever device is current.
        x = torch.randn(4096, 4096).to("eagerc:1")
        src = torch.full((4096, 4096), -2.0, device="cuda:1")
        torch.abs(x)  # compiled for eagerc:1
        print("compiled")
        torch.cuda.synchronize(1)
        side = torch.cuda.Stream(device=1)
        side.wait_stream(torch.cuda.current_stream(1))
        with torch.cuda.stream(side):       # cuda:1 current, its current stream the side one
            torch.cuda._sleep(200_000_000)  # the side stream is busy for ~0.1 s
            x.copy_(src)                    # CUDA's copy, on that stream
            with torch.eagerc.device(0):    # another device current
                y = torch.abs(x)            # must run after the copy, on cuda:1's side stream
            assert torch.cuda.current_device() == 1
        print("launched")
        side.synchronize()
        assert y.device == eagerc1
        assert bool((y.cpu() == 2.0).all())
        assert torch.eagerc.current_device() == 0
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
