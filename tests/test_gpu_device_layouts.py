"""Layouts on the eagerc device on GPU memory (EAGERC_BACKING=cuda) are native CUDA's.

The tiny DDPM UNet failed in its mid block's GroupNorm ("Expected X.is_contiguous(memory_format)
to be true" from CUDA's native_group_norm): a compiled division handed back a (1, 16, 4, 4)
tensor with strides (256, 1, 64, 16) where CUDA's is (16, 1, 64, 16), channels-last to c10
(eagerc/compile/output_strides.py); and the device's group_norm composite (PrivateUse1's)
hands native_group_norm a channels-last input in that format, which CUDA's kernel, run as
eager's check of the call, refused (eagerc/per_op/eager_rules.py makes X contiguous there,
as CUDA's composite does).
The host-memory counterpart is tests/test_output_strides.py.

The backing is chosen at import, so each test runs a fresh process. Skipped where torch
sees no CUDA GPU.
"""
from __future__ import annotations

import pytest
import torch
from gpu_device_runner import run_on_gpu_device

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_division_keeps_cudas_size1_strides(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        x = torch.as_strided(torch.randn(256, device="cuda"), (1, 16, 4, 4), (16, 1, 64, 16))
        d = torch.as_strided(torch.empty(256, device="eagerc"), (1, 16, 4, 4), (16, 1, 64, 16))
        d.copy_(x.to("eagerc"))
        from eagerc.per_op import background
        background.set_mode("eagerc", "now")
        for _ in range(2):  # the compile, then a hit
            assert (d / 2).stride() == (x / 2).stride() == (16, 1, 64, 16), (d / 2).stride()
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_group_norm_of_a_channels_last_input_matches_cuda(tmp_path):
    """Eager's check runs CUDA's kernel as CUDA's composite calls it (X contiguous), so a
    channels-last input compiles and gives CUDA's result, no contiguity error."""
    out = run_on_gpu_device("""
        import copy, torch, eagerc
        from eagerc.testing import assert_close
        from eagerc.per_op import background
        background.set_mode("eagerc", "now")
        torch.manual_seed(0)
        norm = torch.nn.GroupNorm(4, 16).cuda()
        x = torch.randn(2, 16, 4, 4, device="cuda").to(memory_format=torch.channels_last)
        want = norm(x)
        device_norm = copy.deepcopy(norm).to("eagerc")
        for _ in range(2):
            got = device_norm(x.to("eagerc"))
            assert_close(got.cpu(), want.cpu())
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_group_norm_of_a_channels_last_input_in_the_interim_matches_cpu(tmp_path):
    """Answered before its kernel is compiled (the default mode), a channels-last GroupNorm
    runs CUDA's kernel on aliases with X made contiguous, as CUDA's composite calls it;
    forward and backward equal CPU eager's (native CUDA backward cannot run in a process
    where the device is torch's accelerator: tools/bench_gpu_device_train.py)."""
    out = run_on_gpu_device("""
        import copy, torch, eagerc
        from eagerc.testing import assert_close
        from eagerc.per_op import background
        background.set_mode("eagerc", "background")
        torch.manual_seed(0)
        norm = torch.nn.GroupNorm(4, 16)
        x = torch.randn(2, 16, 4, 4).to(memory_format=torch.channels_last).requires_grad_()
        want = norm(x)
        want.square().sum().backward()
        device_norm = copy.deepcopy(norm).to("eagerc")
        dx = x.detach().to("eagerc").requires_grad_()
        got = device_norm(dx)
        got.square().sum().backward()
        assert_close(got.cpu(), want)
        assert_close(dx.grad.cpu(), x.grad)
        assert_close(device_norm.weight.grad.cpu(), norm.weight.grad)
        ops = eagerc.stats()["ops"]
        assert ops["aten::native_group_norm@PrivateUse1"]["interim"] >= 1, ops
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
