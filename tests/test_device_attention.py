"""scaled_dot_product_attention on the eagerc device takes the fused backend the CPU would
choose (csrc/device/attention_choice.cpp): one fused-attention op per call instead of the
math path's matmul/softmax/matmul, with CPU's results and gradients."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import eagerc
from eagerc.testing import assert_close

FUSED = "aten::_scaled_dot_product_flash_attention_for_cpu@PrivateUse1"


def _ops_reached():
    return {name for name, s in eagerc.stats()["ops"].items() if s["hits"] + s["misses"]}


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float 4d"])
def test_attention_takes_the_fused_kernel(mask):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))
    kwargs = {"none": {}, "causal": {"is_causal": True},
              "bool": {"attn_mask": torch.randn(12, 12) > 0},
              "float 4d": {"attn_mask": torch.randn(2, 1, 12, 12)}}[mask]
    on_device = {key: t.to("eagerc") for key, t in kwargs.items() if isinstance(t, torch.Tensor)}
    eagerc.reset_stats()
    out = F.scaled_dot_product_attention(q.to("eagerc"), k.to("eagerc"), v.to("eagerc"),
                                         **{**kwargs, **on_device})
    assert out.device.type == "eagerc"
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, **kwargs))
    reached = _ops_reached()
    assert FUSED in reached and "aten::_safe_softmax@PrivateUse1" not in reached, reached
    assert eagerc.stats()["fallbacks"] == 0


@pytest.mark.slow
def test_gradients_through_the_fused_kernel_match_cpu():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 10, 16) for _ in range(3))
    leaves = [t.to("eagerc").requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=True).square().sum().backward()
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*cpu, is_causal=True).square().sum().backward()
    for got, want in zip(leaves, cpu):
        assert_close(got.grad.cpu(), want.grad)


@pytest.mark.slow
def test_the_users_backend_choice_is_honoured():
    # sdpa_kernel(MATH) turns the fused backends off for the CPU's choice: the math path runs.
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    eagerc.reset_stats()
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q.to("eagerc"), k.to("eagerc"), v.to("eagerc"))
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v))
    reached = _ops_reached()
    assert FUSED not in reached and "aten::_safe_softmax@PrivateUse1" in reached, reached


@pytest.mark.slow  # attention forward and backward compiles: 99 s on a busy 2-core machine
def test_a_mask_that_needs_a_gradient_keeps_the_path_cpu_would_take():
    # T5's position bias is added into the mask and trained: the CPU's choice sees a mask
    # that requires grad and refuses the fused kernel (not differentiable in attn_mask), so
    # the device must decide on stand-ins that keep requires_grad too.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    bias = torch.randn(1, 2, 6, 6)
    on_device = [t.to("eagerc").requires_grad_() for t in (q, k, v, bias)]
    F.scaled_dot_product_attention(*on_device[:3], attn_mask=on_device[3]).square().sum().backward()
    cpu = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    F.scaled_dot_product_attention(*cpu[:3], attn_mask=cpu[3]).square().sum().backward()
    for got, want in zip(on_device, cpu):
        assert_close(got.grad.cpu(), want.grad)


def test_a_remembered_choice_follows_the_users_settings_and_the_call():
    """The choice is kept per thread for calls of equal metadata, arguments, grad mode and
    SDP settings: the same shapes under another setting, or with a mask of other strides
    or a dtype, ask again and take the path CPU takes for them."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    qd, kd, vd = (t.to("eagerc") for t in (q, k, v))

    def path(**kwargs):
        eagerc.reset_stats()
        out = F.scaled_dot_product_attention(qd, kd, vd, **kwargs)
        assert_close(out.cpu(), F.scaled_dot_product_attention(
            q, k, v, **{key: t.cpu() if isinstance(t, torch.Tensor) else t for key, t in kwargs.items()}))
        reached = _ops_reached()
        return "fused" if FUSED in reached else "math" if "aten::_safe_softmax@PrivateUse1" in reached else reached

    assert path() == "fused" and path() == "fused"
    with sdpa_kernel(SDPBackend.MATH):
        assert path() == "math"
    assert path() == "fused"
    with sdpa_kernel(SDPBackend.MATH):
        assert path(is_causal=True) == "math"
    assert path(is_causal=True) == "fused"
    # An error answer (no backend enabled) is never kept: it raises as CPU does, each time.
    with sdpa_kernel([]):
        for _ in range(2):
            with pytest.raises(RuntimeError) as device_error:
                F.scaled_dot_product_attention(qd, kd, vd)
            with pytest.raises(RuntimeError) as cpu_error:
                F.scaled_dot_product_attention(q, k, v)
            assert str(device_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]
    assert path() == "fused"
