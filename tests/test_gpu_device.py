"""The eagerc device on GPU memory (EAGERC_BACKING=cuda): a new GPU device with no
hand-written compute kernels. Its memory comes from PyTorch's CUDA caching allocator and
every compute op is a Triton kernel compiled by eagerc (run on zero-copy CUDA aliases).

The backing is chosen at import, so each test runs a fresh process. The model tests of the
host-memory device run on it too: ``EAGERC_BACKING=cuda pytest tests/test_device_models.py``
(tools/gpu_check.sh). Skipped where torch sees no CUDA GPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def run_on_gpu_device(script: str, cache) -> str:
    env = dict(os.environ, EAGERC_BACKING="cuda", EAGERC_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_memory_is_gpu_memory_and_ops_are_compiled_for_cuda(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        from eagerc import targets
        t = targets.for_device("eagerc")
        assert (t.codegen, t.host_aliases, t.new_device) == ("cuda", True, True), t
        before = torch.cuda.memory_allocated()
        x = torch.randn(1024, 1024).to("eagerc")
        assert torch.cuda.memory_allocated() - before >= 1024 * 1024 * 4
        y = torch.randn(1024, 1024).to("eagerc")
        cx, cy = x.cpu(), y.cpu()
        got = {"add": (x + 2 * y).cpu(), "softmax": torch.softmax(x, -1).cpu(),
               "mm": (x @ y).cpu(), "sum": x.sum(1).cpu(), "item": (x * 0 + 3)[0, 0].item()}
        want = {"add": cx + 2 * cy, "softmax": torch.softmax(cx, -1), "mm": cx @ cy,
                "sum": cx.sum(1), "item": 3.0}
        for k in got:
            if k == "item":
                assert got[k] == want[k]
            else:
                assert torch.allclose(got[k], want[k], atol=1e-3, rtol=1e-4), k
        s = eagerc.stats()
        assert s["fallbacks"] == 0, s
        compiled = sum(v["compiles"] + v.get("disk_loads", 0) for k, v in s["ops"].items()
                       if k.endswith("@PrivateUse1"))
        assert compiled >= 4, s
        z = torch.empty(5, device="eagerc")
        z.resize_(100)              # storage resize on GPU memory keeps the device
        z.fill_(1.5)
        assert z.cpu().sum().item() == 150.0
        base = torch.arange(4.0).to("eagerc")
        grown = torch.empty(0, device="eagerc").set_(base.untyped_storage(), 0, (3, 4), (4, 1))
        assert grown.cpu()[0].tolist() == [0.0, 1.0, 2.0, 3.0]  # set_ grew GPU memory, kept bytes
        torch.eagerc.synchronize()
        print("OK", compiled)
    """, tmp_path / "cache")
    assert "OK" in out


def test_training_step_on_gpu_memory_matches_cpu(tmp_path):
    out = run_on_gpu_device("""
        import copy, torch, eagerc
        from torch import nn
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
        d = copy.deepcopy(m).to("eagerc")
        x, y = torch.randn(8, 20), torch.randint(0, 5, (8,))
        for model, xx, yy in ((m, x, y), (d, x.to("eagerc"), y.to("eagerc"))):
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            loss = nn.functional.cross_entropy(model(xx), yy)
            loss.backward(); opt.step()
        for (n, p), q in zip(m.named_parameters(), d.parameters()):
            assert q.device.type == "eagerc"
            assert torch.allclose(p, q.cpu(), atol=1e-5), n
        assert eagerc.stats()["fallbacks"] == 0
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
