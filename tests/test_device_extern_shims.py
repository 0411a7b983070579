"""Extern calls that a host-memory device's compiled kernels make on its own tensors
(eagerc/codegen/cpp/generator.py, its device-safe shims): ATen's CPU flash attention runs on the eagerc
device's tensors with no CPU aliases, and allocates its output with the device's
allocator; results equal CPU eager."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _C
from eagerc.testing import assert_close


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("case", ["plain", "causal", "scale", "bool mask", "float mask", "gqa",
                                  "strided query"])
def test_flash_attention_runs_on_device_tensors(dtype, case):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 33, 16, dtype=dtype) for _ in range(3))
    kwargs = {}
    if case == "causal":
        kwargs["is_causal"] = True
    elif case == "scale":
        kwargs["scale"] = 0.3
    elif case == "bool mask":
        kwargs["attn_mask"] = torch.randn(33, 33) > 0
    elif case == "float mask":
        kwargs["attn_mask"] = torch.randn(2, 1, 33, 33, dtype=dtype)
    elif case == "gqa":
        k, v = k[:, :2].contiguous(), v[:, :2].contiguous()
        kwargs["enable_gqa"] = True
    elif case == "strided query":
        q = torch.randn(2, 33, 4, 16, dtype=dtype).transpose(1, 2)
    on_device = {n: t.to("eagerc") if isinstance(t, torch.Tensor) else t for n, t in kwargs.items()}
    qd, kd, vd = q.to("eagerc"), k.to("eagerc"), v.to("eagerc")
    eagerc.reset_stats()
    out = F.scaled_dot_product_attention(qd, kd, vd, **on_device)
    assert out.device.type == "eagerc"
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, **kwargs))
    stats = eagerc.stats()
    assert stats["fallbacks"] == 0 and stats["aliased"] == 0, stats
    # The output's memory is the device's own (a CPU alias's would go back to CPU's
    # allocator): freeing it files its block in the device's cache.
    torch.eagerc.empty_cache()
    nbytes = out.untyped_storage().nbytes()
    del out
    assert _C._device_cached_bytes() >= nbytes
