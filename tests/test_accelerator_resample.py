"""The accelerator decomposition of anti-aliased bilinear resampling
(eagerc/compile/accelerator/resample.py) against native eager: OpInfo samples and a grid of
sizes, scales and align_corners on CPU tensors (fast), compiled on the eagerc device with
aliases off (slow)."""
from __future__ import annotations

import textwrap

import pytest
import torch
from vendor_device import SERVED_BY_KERNELS, run_without_aliases

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
from eagerc.testing import assert_close

OP = torch.ops.aten._upsample_bilinear2d_aa.default


def test_matches_eager_on_opinfo_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    info = next(o for o in op_db if o.name == "_upsample_bilinear2d_aa")
    checked = 0
    for dtype in (torch.float32, torch.float64):
        for sample in info.sample_inputs("cpu", dtype):
            calls = []

            class Record(torch.utils._python_dispatch.TorchDispatchMode):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    if func is OP:
                        calls.append((args, kwargs or {}))
                    return func(*args, **(kwargs or {}))

            with Record():
                info.op(sample.input, *sample.args, **sample.kwargs)
            for args, kwargs in calls:
                actual, expected = ACCELERATOR_DECOMPOSITIONS[OP](*args, **kwargs), OP(*args, **kwargs)
                assert (actual.shape, actual.dtype) == (expected.shape, expected.dtype)
                assert_close(actual, expected)
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("size", [(10, 20), (7, 3), (1, 5), (16, 16), (33, 17)])
def test_sizes_scales_and_corners(size):
    """Down- and upsampling, a dim that keeps its size (copied whatever its scale), one
    output pixel, given scales that agree with the sizes, align_corners."""
    x = torch.randn(2, 3, *size)
    for out in [(3, 3), (5, 5), (1, 1), (20, 40), (16, 16), (4, 9), (13, 2)]:
        for align_corners in (False, True):
            scales = [(None, None), (out[0] / size[0], out[1] / size[1])]
            for scale_h, scale_w in scales:
                expected = OP(x, list(out), align_corners, scale_h, scale_w)
                actual = ACCELERATOR_DECOMPOSITIONS[OP](x, list(out), align_corners, scale_h, scale_w)
                assert_close(actual, expected)
    same = OP(x, list(size), False, 0.9, 3.0)  # sizes unchanged: a copy, scales ignored
    assert_close(ACCELERATOR_DECOMPOSITIONS[OP](x, list(size), False, 0.9, 3.0), same)
    assert torch.equal(same, x)


def test_keeps_channels_last():
    x = torch.randn(2, 3, 10, 20).to(memory_format=torch.channels_last)
    expected, actual = OP(x, [3, 5], False), ACCELERATOR_DECOMPOSITIONS[OP](x, [3, 5], False)
    assert actual.stride() == expected.stride()
    assert_close(actual, expected)


_ON_DEVICE = SERVED_BY_KERNELS + textwrap.dedent("""
    import torch, eagerc
    torch.manual_seed(0)  # fixed inputs: each process draws other ones otherwise
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    info = next(o for o in op_db if o.name == "_upsample_bilinear2d_aa")
    for s in info.sample_inputs("cpu", torch.float32):
        expected = info.op(s.input, *s.args, **s.kwargs)
        actual = info.op(s.input.to("eagerc"), *s.args, **s.kwargs)
        assert actual.device.type == "eagerc" and actual.shape == expected.shape
        assert_close(actual.cpu(), expected)
    served_by_kernels(("_upsample_bilinear2d_aa",), no_aliases=True)
    print("OK")
""")


@pytest.mark.slow
def test_compiled_on_a_device_without_aliases():
    run_without_aliases(_ON_DEVICE)
