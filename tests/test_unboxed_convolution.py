"""aten::convolution on the eagerc device through its unboxed kernel
(csrc/unboxed_convolution.cpp): the typed signature has the boxed one's bytes, so a
kernel compiled through the boxed holder serves the typed calls; results are eager's."""
import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _C
from eagerc.testing import assert_close


CASES = [  # input shape, weight shape, bias, stride, padding, dilation, transposed, out pad, groups
    ((2, 4, 8, 8), (4, 4, 3, 3), False, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    ((2, 4, 9, 7), (6, 2, 3, 1), True, [2, 1], [0, 2], [1, 3], False, [0, 0], 2),
    ((1, 3, 10), (5, 3, 4), True, [3], [1], [1], False, [0], 1),
    ((1, 2, 4, 5, 6), (3, 2, 2, 2, 2), False, [1, 2, 1], [0, 1, 0], [1, 1, 1], False, [0, 0, 0], 1),
    ((2, 4, 5, 5), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], True, [1, 0], 1),
]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_typed_key_is_the_boxed_key(miss_keys, case):
    shape, wshape, has_bias, stride, padding, dilation, transposed, out_pad, groups = case
    x, w = torch.randn(shape), torch.randn(wshape)
    b = torch.randn(wshape[1] * groups if transposed else wshape[0]) if has_bias else None
    args = (stride, padding, dilation, transposed, out_pad, groups)
    expected = torch.ops.aten.convolution(x, w, b, *args)
    device_args = [t.to("eagerc") if t is not None else None for t in (x, w, b)]
    for _ in range(3):  # a miss (through the boxed holder), then typed hits
        assert_close(torch.ops.aten.convolution(*device_args, *args).cpu(), expected)
    # The boxed holder's key on the CPU aliases is the key the typed kernel computes.
    boxed = [key for op, key in miss_keys if op == "aten::convolution" and key[2:3] == b"\x00"]
    assert boxed == [_C._convolution_signature_key(x, w, b, *args)]
    stats = eagerc.stats()["ops"]["aten::convolution@PrivateUse1"]
    assert (stats["compiles"], stats["hits"], stats["fallbacks"]) == (1, 2, 0), stats


@pytest.mark.slow
def test_models_convolutions_match_eager_with_grad(fresh_cache):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = torch.randn(2, 3, 12, 12, requires_grad=True)
    dconv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1).to("eagerc")
    dconv.load_state_dict(conv.state_dict())
    dx = x.detach().to("eagerc").requires_grad_()
    for _ in range(2):
        out, dout = conv(x), dconv(dx)
        assert dout.device.type == "eagerc"
        assert_close(dout.cpu(), out)
        out.sum().backward()
        dout.sum().backward()
    assert_close(dx.grad.cpu(), x.grad)
    assert_close(dconv.weight.grad.cpu(), conv.weight.grad)
    with torch.no_grad():
        assert_close(F.conv2d(dx, dconv.weight, None, 1, 0).cpu(), F.conv2d(x, conv.weight, None, 1, 0))
    stats = eagerc.stats()["ops"]["aten::convolution@PrivateUse1"]
    assert stats["fallbacks"] == 0 and stats["hits"] >= 1, stats


def _conv_stats():
    return eagerc.stats()["ops"]["aten::convolution@PrivateUse1"]


def test_reused_aliases_follow_each_calls_tensors(fresh_cache):
    # The typed kernel keeps its CPU aliases from call to call and points them at each
    # call's tensors (host_alias.h ReusedAlias): new memory, new strides, a view's offset,
    # a changed value and another dtype each reach the kernel.
    torch.manual_seed(0)
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    calls = []
    for dtype in (torch.float32, torch.float32, torch.float64, torch.float32):
        calls.append((torch.randn(2, 3, 6, 6, dtype=dtype), torch.randn(4, 3, 3, 3, dtype=dtype)))
    calls.append((calls[0][0].contiguous(memory_format=torch.channels_last), calls[0][1]))
    big = torch.randn(3, 3, 6, 6)
    calls.append((big[1:], calls[1][1]))  # a view with a storage offset
    for x, w in calls + calls:
        dx, dw = x.to("eagerc"), w.to("eagerc")
        assert_close(torch.ops.aten.convolution(dx, dw, None, *args).cpu(),
                     torch.ops.aten.convolution(x, w, None, *args))
        dw.mul_(-1)  # in place: the next call on the same tensor sees it
        assert_close(torch.ops.aten.convolution(dx, dw, None, *args).cpu(),
                     torch.ops.aten.convolution(x, -w, None, *args))
    stats = _conv_stats()
    assert stats["fallbacks"] == 0 and stats["hits"] >= len(calls) * 3, stats


def test_reused_aliases_keep_no_device_memory_alive(fresh_cache):
    from torch.multiprocessing.reductions import StorageWeakRef

    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    x, w, b = torch.randn(1, 2, 4, 4), torch.randn(3, 2, 1, 1), torch.randn(3)
    for _ in range(2):  # a miss, then a typed hit
        dx, dw, db = x.to("eagerc"), w.to("eagerc"), b.to("eagerc")
        out = torch.ops.aten.convolution(dx, dw, db, *args)
    assert _conv_stats()["hits"] == 1
    assert_close(out.cpu(), torch.ops.aten.convolution(x, w, b, *args))
    refs = [StorageWeakRef(t.untyped_storage()) for t in (dx, dw, db)]
    del dx, dw, db
    assert [r.expired() for r in refs] == [True, True, True]


def test_arguments_over_one_storage_match_eager(fresh_cache):
    # Input and weight in one device storage take one CPU storage (CallAliases), as
    # before; values are eager's.
    buf = torch.randn(2 * 3 * 5 * 5 + 4 * 3 * 3 * 3)
    x, w = buf[:150].view(2, 3, 5, 5), buf[150:].view(4, 3, 3, 3)
    dbuf = buf.to("eagerc")
    dx, dw = dbuf[:150].view(2, 3, 5, 5), dbuf[150:].view(4, 3, 3, 3)
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    for _ in range(3):
        assert_close(torch.ops.aten.convolution(dx, dw, None, *args).cpu(),
                     torch.ops.aten.convolution(x, w, None, *args))
    assert _conv_stats()["hits"] == 2
