"""Where Inductor falls short per op: ops it hands back to ATen, made generated code
(eagerc/compile/op.py), and calls it computes wrongly, refused (compile/known_wrong.py).

Inductor keeps some ops as calls of ATen's kernel (upsample_bilinear2d and friends) where
torch._decomp has a decomposition. eagerc's compiler sees that the artifact would only
call the op itself and traces again with that decomposition: the op becomes a generated
kernel (a compile, not a run of ATen's kernel on aliases), with eager's values.
Also: the int lists Inductor's wrapper passes to boxed ATen calls (boxed_int_lists.py).
"""
import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc.aten_meta import overload_by_name
from eagerc.compile.boxed_int_lists import fix_boxed_int_lists
from eagerc.testing import assert_close


def _op_stats(op):
    return eagerc.stats()["ops"].get(f"{op}@PrivateUse1", {})


@pytest.mark.parametrize("mode,op,shape", [
    ("bilinear", "aten::upsample_bilinear2d", (1, 2, 5, 7)),
    ("bicubic", "aten::upsample_bicubic2d", (2, 1, 4, 6)),
    ("trilinear", "aten::upsample_trilinear3d", (1, 1, 3, 4, 5)),
])
@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_compiles_through_its_decomposition(fresh_cache, mode, op, shape, align_corners):
    x = torch.randn(shape)
    got = F.interpolate(x.to("eagerc"), scale_factor=2.5, mode=mode, align_corners=align_corners)
    assert_close(got.cpu(), F.interpolate(x, scale_factor=2.5, mode=mode, align_corners=align_corners))
    stats = _op_stats(op)
    assert (stats["compiles"], stats["aliased"], stats["fallback_reasons"]) == (1, 0, {}), stats


def test_ci_in_the_environment_changes_nothing(fresh_cache, monkeypatch):
    # With CI set, Inductor asserts where it would make a fallback for an op that has a
    # decomposition (torch/_inductor/lowering.py make_fallback): eagerc decomposes first.
    monkeypatch.setenv("CI", "true")
    x = torch.randn(2, 3, 4, 5)
    got = F.interpolate(x.to("eagerc"), scale_factor=1.5, mode="bilinear")
    assert_close(got.cpu(), F.interpolate(x, scale_factor=1.5, mode="bilinear"))
    stats = _op_stats("aten::upsample_bilinear2d")
    assert (stats["compiles"], stats["aliased"], stats["fallback_reasons"]) == (1, 0, {}), stats


def test_an_op_without_a_decomposition_still_runs_on_aliases(fresh_cache):
    x = torch.randn(1, 2, 8, 9)
    got = F.interpolate(x.to("eagerc"), size=(3, 4), mode="bilinear", antialias=True)
    assert_close(got.cpu(), F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True))
    stats = _op_stats("aten::_upsample_bilinear2d_aa")
    assert stats["compiles"] == 0 and stats["aliased"] == 1, stats
    assert any("no lowering" in r for r in stats["fallback_reasons"]), stats


WRAPPER = """
#include <ATen/core/ivalue.h>

void inductor_entry_impl(AtenTensorHandle* input_handles) {
        c10::impl::GenericList tmp_list_1(c10::SymIntType::get());
        tmp_list_1.emplace_back(c10::IValue(c10::SymInt(static_cast<int64_t>(8L))));
        dispatch_stack_0.emplace_back(c10::IValue(std::move(tmp_list_1)));
        c10::impl::GenericList tmp_list_2(c10::TensorType::get());
        dispatch_stack_0.emplace_back(c10::IValue(std::move(tmp_list_2)));
}
"""


def test_int_lists_pushed_to_boxed_calls_become_int_lists():
    fixed = fix_boxed_int_lists(WRAPPER)
    assert "dispatch_stack_0.emplace_back(eagerc_int_list_ivalue(tmp_list_1));" in fixed
    assert "c10::IValue(std::move(tmp_list_2))" in fixed  # a tensor list is left alone
    # The helper is defined once, after the includes and before the first function.
    assert fixed.count("static inline c10::IValue eagerc_int_list_ivalue(") == 1
    assert fixed.index("#include") < fixed.index("eagerc_int_list_ivalue(") < fixed.index("void inductor")
    assert fix_boxed_int_lists("void f() {}") == "void f() {}"


@pytest.mark.parametrize("call,op", [
    # Inductor (torch.compile alike) ignores the explicit scales of this backward.
    (lambda g: torch.ops.aten.upsample_nearest2d_backward(g, [8, 8], [1, 2, 5, 5], 1.7, 1.7),
     "aten::upsample_nearest2d_backward"),
    # ...and miscounts ceil-mode windows past the padding here (OpInfo avg_pool1d sample).
    (lambda g: torch.ops.aten.avg_pool2d_backward(g[..., :1, :4], torch.zeros(1, 2, 1, 9, device=g.device),
                                                 [1, 6], [1, 3], [0, 2], True, True, None),
     "aten::avg_pool2d_backward"),
    # ...and returns an empty noise in eval mode (eager returns the noise given).
    (lambda g: torch.ops.aten.rrelu_with_noise_functional(g, g.abs(), 0.125, 1 / 3, False)[1],
     "aten::rrelu_with_noise_functional"),
    # ...and, vectorized with a masked tail, takes a True for the minimum of a bool row.
    (lambda g: torch.min(g[0, 0, :6, :] > 0, 1).indices, "aten::min.dim"),
])
def test_calls_inductor_computes_wrongly_run_eagers_kernel(fresh_cache, call, op):
    g = torch.randn(1, 2, 8, 8)
    assert_close(call(g.to("eagerc")).cpu(), call(g))
    stats = _op_stats(op)  # refused: eager's kernel ran (on aliases, or its composite form)
    # A random op (rrelu_with_noise) is not compiled on host memory at all: the CPU's kernel
    # on aliases serves it (counted as aliased); the refusal guards the devices that
    # compile random ops (GPU memory, aliases off).
    assert stats.get("compiles", 0) == 0, stats
    if torch.Tag.nondeterministic_seeded in overload_by_name(op).tags:
        # Its composite calls the in-place form, which the CPU's kernel serves on aliases.
        family = {k: v for k, v in eagerc.stats()["ops"].items()
                  if k.startswith(op.split(".")[0].removesuffix("_functional"))}
        assert sum(v["aliased"] for v in family.values()) == 1, family
        assert sum(v["compiles"] for v in family.values()) == 0, family
    else:
        assert stats["fallbacks"] == 1, stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cpu_softmax_through_eagercs_decomposition_matches_eager(fresh_cache, dtype):
    # codegen/cpp/cpu_decompositions.py: the reciprocal of each row sum is its own buffer and
    # the output is scaled in place. Rows with inf, an all -inf row (NaN, as eager), a NaN;
    # the last dim, dim 0, a transposed input, a 3-d input; each kernel compiles once.
    x = torch.randn(6, 20)
    x[0, 3], x[1, :], x[2, 5] = float("inf"), float("-inf"), float("nan")
    cases = [(x, -1), (x, 0), (x.t(), -1), (torch.randn(2, 3, 17), 1)]
    cases = [(t.to(dtype), dim) for t, dim in cases]
    expected = [torch.softmax(t, dim) for t, dim in cases]
    with eagerc.enabled("cpu", ops=["aten::_softmax"]):
        for _ in range(2):  # the second round hits
            for (t, dim), want in zip(cases, expected):
                got = torch.softmax(t, dim)
                assert got.stride() == want.stride()
                assert_close(got, want, equal_nan=True)
    stats = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert (stats["compiles"], stats["hits"], stats["fallbacks"]) == (len(cases), len(cases), 0), stats


def _max_pool_inputs(shape, dtype):
    # Random values; NaNs (several in one window: ATen's index is the last) and -inf; only
    # -inf (windows over the padding: ATen's index is the first tap inside the input); ties
    # of 0.0 and -0.0 (the first tap wins, value and index).
    x = torch.randn(shape)
    nans = x.clone()
    nans[..., ::3, ::2] = float("nan")
    nans[..., 1::4, :] = float("-inf")
    ties = torch.randint(-1, 2, shape).float()
    ties[ties == 0] = -0.0
    ties[..., ::2, 1::3] = 0.0
    return [t.to(dtype) for t in (x, nans, torch.full(shape, float("-inf")), ties)]


@pytest.mark.parametrize("dtype,shape,args,layout", [
    (torch.float32, (2, 4, 9, 8), ([3, 3], [2, 2], [1, 1], [1, 1], False), "contiguous"),
    (torch.float32, (2, 3, 7, 9), ([3, 2], [1, 2], [1, 0], [2, 1], True), "channels_last"),
    (torch.float64, (2, 3, 9, 7), ([2, 3], [], [1, 1], [1, 2], True), "transposed"),
    (torch.bfloat16, (3, 7, 9), ([3, 3], [2, 2], [1, 1], [1, 1], True), "contiguous"),
    # The first tap inside the input is a dilation step past the padding (row 1, column 1).
    (torch.float32, (2, 3, 15, 10), ([5, 3], [2, 1], [2, 1], [3, 2], True), "contiguous"),
    # One tap (adaptive_max_pool2d to the input's size): indices of the output's shape.
    (torch.float32, (2, 3, 7, 9), ([1, 1], [1, 1], [0, 0], [1, 1], False), "contiguous"),
])
def test_max_pool2d_through_eagercs_decomposition_is_atens(fresh_cache, dtype, shape, args, layout):
    # codegen/cpp/cpu_decompositions.py: ATen's loop as a generated kernel. Values (with the
    # sign of a zero) and indices are ATen's, bit for bit; each kernel compiles once.
    inputs = _max_pool_inputs(shape, dtype)
    if layout == "channels_last":
        inputs = [t.contiguous(memory_format=torch.channels_last) for t in inputs]
    elif layout == "transposed":
        inputs = [t.transpose(-1, -2) for t in inputs]
    for x in inputs:
        want, want_idx = torch.ops.aten.max_pool2d_with_indices(x, *args)
        got, idx = torch.ops.aten.max_pool2d_with_indices(x.to("eagerc"), *args)
        got, idx = got.cpu(), idx.cpu()
        assert (got.stride(), idx.stride()) == (want.stride(), want_idx.stride())
        assert torch.equal(idx, want_idx)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.5), want.nan_to_num(0.5))
        assert torch.equal(got.signbit(), want.signbit())
    stats = _op_stats("aten::max_pool2d_with_indices")
    assert (stats["compiles"], stats["aliased"], stats["hits"]) == (1, 0, len(inputs) - 1), stats


def _with_infinities(x):
    # Random values; a run of +inf (two equal infinite neighbours: torch._decomp's
    # v0 + (v1 - v0) * lambda gives NaN there, ATen inf), -inf beside +inf, and NaN.
    x = x.clone()
    flat = x.view(-1)
    flat[1:4] = float("inf")
    flat[::7] = float("-inf")
    flat[5::11] = float("nan")
    return x


def _assert_same_values(got, want):
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.5), want.nan_to_num(0.5))


_UPSAMPLE_LINEAR = {1: "upsample_linear1d", 2: "upsample_bilinear2d", 3: "upsample_trilinear3d"}


@pytest.mark.parametrize("dtype,shape,size,align_corners,scales,layout", [
    (torch.float32, (2, 3, 6), [11], False, [None], "contiguous"),
    # A dim of the same size: 1 * v + 0 * v, NaN for an infinite v in ATen too.
    (torch.float32, (2, 3, 6), [6], True, [None], "contiguous"),
    (torch.float64, (1, 2, 7), [3], False, [1.7], "contiguous"),
    # Output height + width at most 128: ATen's channels-last kernel, its scalar loop.
    (torch.float32, (2, 3, 4, 5), [7, 9], True, [None, None], "contiguous"),
    (torch.float32, (1, 2, 4, 5), [70, 61], False, [1.5, None], "contiguous"),  # generic
    # 20 channels of a channels-last input: a full vector and a scalar tail per pixel.
    (torch.float32, (2, 20, 3, 4), [7, 4], False, [None, None], "channels_last"),
    (torch.float64, (1, 2, 2, 3, 4), [5, 3, 9], True, [None, 2.5, None], "contiguous"),
    (torch.float32, (1, 20, 2, 3, 4), [3, 4, 7], False, [None, None, 0.6], "channels_last"),
])
def test_upsample_linear_through_eagercs_decomposition_is_atens(fresh_cache, dtype, shape, size,
                                                                align_corners, scales, layout):
    # codegen/cpp/upsample_linear.py: ATen's indices, weights and sums; values, NaN and inf
    # positions are ATen's bit for bit, in the functional, out= and .vec forms.
    name = _UPSAMPLE_LINEAR[len(size)]
    op = getattr(torch.ops.aten, name)
    x = torch.randn(shape, dtype=dtype)
    inputs = [x, _with_infinities(x)]
    if layout == "channels_last":
        memory_format = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        inputs = [t.contiguous(memory_format=memory_format) for t in inputs]
    for t in inputs:
        want = op(t, size, align_corners, *scales)
        got = op(t.to("eagerc"), size, align_corners, *scales).cpu()
        assert got.stride() == want.stride()
        _assert_same_values(got, want)
        out = torch.empty(want.shape, dtype=dtype, device="eagerc")
        op.out(t.to("eagerc"), size, align_corners, *scales, out=out)
        _assert_same_values(out.cpu(), want)
        vec_args = (size, align_corners, None)
        _assert_same_values(op.vec(t.to("eagerc"), *vec_args).cpu(), op.vec(t, *vec_args))
    # One kernel; the .vec form (a composite calling the functional one without scales)
    # another where scales are given.
    kernels = 1 + any(s is not None for s in scales)
    stats = _op_stats(f"aten::{name}")
    assert (stats["compiles"], stats["aliased"], stats["fallback_reasons"]) == (kernels, 0, {}), stats


def test_upsample_linear_of_a_half_type_has_atens_nan_positions(fresh_cache):
    # Half types compute in float; ATen also rounds its lambdas to the half type, which
    # Inductor leaves out: NaN and inf positions are ATen's, values within a rounding.
    x = _with_infinities(torch.randn(2, 3, 5, 6)).to(torch.bfloat16)
    for align_corners in (False, True):
        want = F.interpolate(x, size=(9, 6), mode="bilinear", align_corners=align_corners)
        got = F.interpolate(x.to("eagerc"), size=(9, 6), mode="bilinear",
                            align_corners=align_corners).cpu()
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.isinf(), want.isinf())
        assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("name,variant", [
    ("nn.functional.interpolate", "linear"),
    ("nn.functional.upsample_bilinear", ""),
    # ~35 s each: a kernel per output size and align_corners.
    pytest.param("nn.functional.interpolate", "bilinear", marks=pytest.mark.slow),
    pytest.param("nn.functional.interpolate", "trilinear", marks=pytest.mark.slow),
])
def test_upsample_linear_opinfo_samples_are_atens(fresh_cache, name, variant):
    # Every OpInfo sample (torch.testing's common_methods_invocations), as given and with
    # infinities, float32: ATen's values bit for bit.
    from torch.testing._internal.common_methods_invocations import op_db

    info = next(o for o in op_db if o.name == name and o.variant_test_name == variant)
    for sample in info.sample_inputs("cpu", torch.float32):
        for x in (sample.input, _with_infinities(sample.input)):
            want = info.op(x, *sample.args, **sample.kwargs)
            got = info.op(x.to("eagerc"), *sample.args, **sample.kwargs).cpu()
            _assert_same_values(got, want)
    aliased = sum(v["aliased"] for k, v in eagerc.stats()["ops"].items() if "upsample" in k)
    assert aliased == 0
