"""Compiled kernels return eager's strides, size-1 dims included
(eagerc/compile/output_strides.py).

A size-1 dim's stride moves no data, but c10 reads it to suggest a memory format, and ops
choose their layout from that suggestion: group_norm makes its input
``contiguous(input.suggest_memory_format())``, and CUDA's native_group_norm wants it
contiguous. Torch's meta functions (which a traced graph follows) differ from eager there:
``x / 2`` of a (1, 16, 4, 4) tensor with strides (16, 1, 64, 16) is (16, 1, 64, 16) in
eager, (256, 1, 64, 16) on meta, which reads as channels-last. The tiny DDPM UNet makes
such a tensor (an attention block's output, divided by its rescale factor) before its mid
block's GroupNorm.
"""
from __future__ import annotations

import pytest
import torch
from torch._prims_common import suggest_memory_format  # c10's rule, in Python

import eagerc  # noqa: F401  (registers the device)

DEV = "eagerc"


def odd_channels_last(n, c, h, w, batch_stride):
    """A (n, c, h, w) tensor laid out channels-last whose size-1 batch dim has stride
    `batch_stride` (the layout diffusers' attention blocks hand back: (16, 1, 64, 16))."""
    base = torch.randn(n * c * h * w)
    return torch.as_strided(base, (n, c, h, w), (batch_stride, 1, w * c, c))


def on_device(x):
    """`x` on the device with the same sizes and strides."""
    storage = torch.empty(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype)
    storage.as_strided(x.shape, x.stride()).copy_(x)
    return torch.as_strided(storage.to(DEV), x.shape, x.stride())


def test_division_by_a_scalar_keeps_eagers_batch_stride(fresh_cache):
    """Eager: (16, 1, 64, 16) stays (16, 1, 64, 16), not channels-last to c10; the kernel
    gives the same, on its compile and on a hit, and for other sizes of its signature."""
    for c, hw in ((16, 4), (16, 4), (32, 6)):
        x = odd_channels_last(1, c, hw, hw, batch_stride=c)
        want = x / 2
        got = on_device(x) / 2
        assert got.stride() == want.stride(), (c, hw)
        assert suggest_memory_format(got) == suggest_memory_format(want) == torch.contiguous_format
        torch.testing.assert_close(got.cpu(), want)
    ops = eagerc.stats()["ops"]["aten::div.Tensor@PrivateUse1"]
    assert ops["compiles"] == 1 and ops["hits"] == 2


def test_group_norm_after_the_division_gets_eagers_layout(fresh_cache):
    """What GroupNorm's composite hands native_group_norm follows the suggested format: with
    eager's strides it is contiguous, as eager's is."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Inputs(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.native_group_norm.default:
                self.seen.append(args[0].stride())
            return func(*args, **(kwargs or {}))

    x = odd_channels_last(1, 16, 4, 4, batch_stride=16)
    d = on_device(x)
    d / 2  # the division's kernel is compiled outside the mode (a dispatch mode compiles nothing)
    norm = torch.nn.GroupNorm(4, 16)
    with Inputs() as cpu:
        want = norm(x / 2)
    with Inputs() as dev:
        got = norm.to(DEV)(d / 2)
    assert dev.seen == cpu.seen == [(256, 16, 4, 1)]
    torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


# Ops over inputs with size-1 dims in layouts eager and meta may read differently.
def _cases():
    odd = lambda: odd_channels_last(1, 16, 4, 4, batch_stride=16)  # noqa: E731
    cl = lambda: torch.randn(1, 4, 4, 16).permute(0, 3, 1, 2)  # noqa: E731
    wide = lambda: torch.randn(16, 1, 8).transpose(0, 1)  # noqa: E731  (1, 16, 8) strides (8, 8, 1)
    return {
        "div_scalar_odd": (odd, lambda t: t / 3),
        "add_scalar_odd": (odd, lambda t: t + 1),
        "mul_scalar_cl": (cl, lambda t: t * 2),
        "neg_odd": (odd, torch.neg),
        "sigmoid_odd": (odd, torch.sigmoid),
        "add_bias_odd": (odd, lambda t: t + torch.ones(1, 16, 1, 1, device=t.device)),
        "add_tensors_odd": (odd, lambda t: t + t),
        "clone_odd": (odd, torch.clone),
        "to_double_odd": (odd, lambda t: t.to(torch.float64)),
        "sum_keepdim_odd": (odd, lambda t: t.sum(2, keepdim=True)),
        "softmax_odd": (odd, lambda t: torch.softmax(t, 1)),
        "add_scalar_wide": (wide, lambda t: t + 1),
        "gelu_wide": (wide, torch.nn.functional.gelu),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_have_eagers_strides(name):
    """Each output's strides equal eager's on the CPU, size-1 dims included."""
    make, fn = CASES[name]
    x = make()
    want = fn(x)
    got = fn(on_device(x))
    assert got.shape == want.shape
    assert got.stride() == want.stride(), (name, got.stride(), want.stride())
    torch.testing.assert_close(got.cpu(), want)
