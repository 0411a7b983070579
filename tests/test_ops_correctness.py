"""Compiled kernels give the same results as native eager, op by op.

Every case computes the native result first (eagerc disabled), then the same call with
eagerc serving exactly the overload(s) that the call reaches at the CPU dispatch key,
compares through eagerc.testing.assert_close (dtype and shape included), and checks
that the compiled kernel really ran: hits + misses > 0 and no fallback for each op.

Two sources of cases: OpInfo samples from torch's op_db (a few per op) and hand-written
calls for the argument kinds eagerc has to get right (alpha / Scalar arguments, type
promotion, int[] dims with keepdim, Tensor[] inputs, optional bounds, in-place and out=,
non-contiguous, zero-size and broadcast inputs, float64 / int64 / bool).
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import eagerc
from eagerc.testing import assert_close


# --------------------------------------------------------------------------- helpers

def _qualify(op: str) -> str:
    return op if op.startswith("aten::") else "aten::" + op


def assert_compiled_ran(ops):
    """Each op's compiled kernel served the call: counted, and never fell back."""
    per_op = eagerc.stats()["ops"]
    for op in ops:
        s = per_op.get(_qualify(op) + "@CPU")
        assert s is not None and s["hits"] + s["misses"] > 0, (
            f"{op} never reached eagerc (wrong overload?); ops seen: {sorted(per_op)}")
        assert s["fallbacks"] == 0, f"{op} fell back to native: {s['fallback_reasons']}"
        assert s.get("aliased", 0) == 0, f"{op} ran ATen's kernel on aliases, not a compiled one"


def check(setup, call, ops):
    """Native result first, then the compiled one from fresh inputs (`setup` is
    deterministic), compared through the shared tolerance table."""
    assert not eagerc._C._is_enabled("CPU"), "a previous test left eagerc enabled"
    expected = call(*setup())
    eagerc.reset_stats()
    args = setup()
    with eagerc.enabled("cpu", ops=ops):
        actual = call(*args)
    assert_compiled_ran(ops)
    assert_close(actual, expected, equal_nan=True)


def rand(*shape, dtype=torch.float32, seed=0, low=None, high=None):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-9 if low is None else low, 10 if high is None else high, shape,
                             generator=g, dtype=dtype)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if low is not None:
        x = x.abs() + low
    return x


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(f"aten::{func._schema.name.split('::')[-1]}"
                        + ("" if func._overloadname == "default" else f".{func._overloadname}"))
        return func(*args, **(kwargs or {}))


def reached_ops(fn, *args, **kwargs):
    with _RecordOps() as rec:
        fn(*args, **kwargs)
    return rec.ops


# --------------------------------------------------------------- OpInfo samples
# (OpInfo name, variant, the overload its samples reach at the CPU key, samples to take).
OPINFO_OPS = [
    ("exp", "", "aten::exp", 1),
    ("log", "", "aten::log", 1),
    ("sin", "", "aten::sin", 1),
    ("sqrt", "", "aten::sqrt", 1),
    ("rsqrt", "", "aten::rsqrt", 1),
    ("tanh", "", "aten::tanh", 1),
    ("sigmoid", "", "aten::sigmoid", 1),
    ("reciprocal", "", "aten::reciprocal", 1),
    ("erf", "", "aten::erf", 1),
    ("floor", "", "aten::floor", 1),
    ("sign", "", "aten::sign", 1),
    ("nn.functional.relu", "", "aten::relu", 1),
    ("add", "", "aten::add.Tensor", 2),
    ("sub", "", "aten::sub.Tensor", 1),
    ("mul", "", "aten::mul.Tensor", 1),
    ("div", "no_rounding_mode", "aten::div.Tensor", 1),
    ("maximum", "", "aten::maximum", 1),
    ("minimum", "", "aten::minimum", 1),
    ("atan2", "", "aten::atan2", 1),
    ("hypot", "", "aten::hypot", 1),
    ("pow", "", "aten::pow.Tensor_Tensor", 1),
    ("fmod", "", "aten::fmod.Tensor", 1),
    # (remainder: its float32 samples run eager's kernel, compile/known_wrong.py;
    # tests/test_wrapped_numbers.py compiles integer remainders)
    ("eq", "", "aten::eq.Tensor", 1),
    ("gt", "", "aten::gt.Tensor", 1),
    ("logical_and", "", "aten::logical_and", 1),
    ("sum", "", "aten::sum.dim_IntList", 2),
    ("mean", "", "aten::mean.dim", 1),
    ("amax", "", "aten::amax", 1),
    ("amin", "", "aten::amin", 1),
    ("prod", "", "aten::prod.dim_int", 1),
    ("var", "", "aten::var.correction", 2),
    ("logsumexp", "", "aten::logsumexp", 1),
    ("softmax", "", "aten::_softmax", 1),
    ("log_softmax", "", "aten::_log_softmax", 1),
    ("where", "", "aten::where.self", 1),
    ("clamp", "", "aten::clamp.Tensor", 1),
    ("masked_fill", "", "aten::masked_fill.Scalar", 1),
    ("lerp", "", "aten::lerp.Scalar", 1),
    ("addcmul", "", "aten::addcmul", 2),
    ("cat", "", "aten::cat", 1),
    ("stack", "", "aten::stack", 1),
    ("index_select", "", "aten::index_select", 1),
    ("gather", "", "aten::gather", 1),
    ("mm", "", "aten::mm", 1),
    ("addmm", "", "aten::addmm", 1),
    ("bmm", "", "aten::bmm", 1),
]


# (op name, sample) -> reason, for OpInfo samples eagerc is known to get wrong; none now.
OPINFO_KNOWN_BUGS = []


def _describe_sample(sample):
    def d(v):
        if isinstance(v, torch.Tensor):
            nc = "" if v.is_contiguous() else "nc"
            return f"{str(v.dtype)[6:]}{list(v.shape)}{nc}".replace(" ", "")
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(d(x) for x in v) + "]"
        return repr(v).replace(" ", "")
    parts = [d(sample.input)] + [d(a) for a in sample.args] + [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    return "(" + ",".join(parts) + ")"


def _opinfo_params():
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as e:  # expecttest is a torch test-only dependency
        return [pytest.param(None, None, None, id="opinfo-unavailable",
                             marks=pytest.mark.skip(reason=f"OpInfo database not importable: {e}"))]
    by_name = {(o.name, o.variant_test_name): o for o in op_db}
    params = []
    for name, variant, overload, take in OPINFO_OPS:
        opinfo = by_name[(name, variant)]
        samples = list(opinfo.sample_inputs("cpu", torch.float32))
        # Only samples that reach exactly this overload (sum() without dims reaches
        # aten::sum, not aten::sum.dim_IntList, and is left to the hand-written cases).
        fitting = [s for s in samples if reached_ops(opinfo.op, s.input, *s.args, **s.kwargs) == [overload]]
        assert fitting, f"no {name} sample reaches {overload}"
        picks = sorted({round(i * (len(fitting) - 1) / max(take - 1, 1)) for i in range(take)})
        for i in picks:
            s = fitting[i]
            pid = f"{name}-{overload[6:]}-{_describe_sample(s)[:80]}"
            marks = [pytest.mark.xfail(strict=True, reason=why)
                     for match, why in OPINFO_KNOWN_BUGS if match(opinfo.name, s)]
            params.append(pytest.param(opinfo.op, s, overload, id=pid, marks=marks))
    return params


@pytest.mark.parametrize("fn,sample,overload", _opinfo_params())
def test_opinfo_sample(fn, sample, overload):
    # OpInfo ops are functional: the sample's tensors are read, never written.
    check(lambda: (sample.input, sample.args, sample.kwargs),
          lambda x, a, kw: fn(x, *a, **kw), [overload])


# -------------------------------------------------------------- hand-written cases
f32, f64, i64, b8 = torch.float32, torch.float64, torch.int64, torch.bool


def case(id, ops, setup, call, marks=()):
    return pytest.param(setup, call, list(ops), id=id, marks=marks)


CASES = [
    # binary elementwise: alpha and Scalar arguments
    case("add.Tensor-alpha_float", ["add.Tensor"],
         lambda: (rand(5, 7), rand(5, 7, seed=1)), lambda a, b: torch.add(a, b, alpha=2.5)),
    case("sub.Tensor-int64-alpha_int", ["sub.Tensor"],
         lambda: (rand(5, 7, dtype=i64), rand(5, 7, dtype=i64, seed=1)), lambda a, b: torch.sub(a, b, alpha=3)),
    case("mul.Tensor-python_scalar", ["mul.Tensor"], lambda: (rand(6, 5),), lambda a: a * 3.5),
    case("add.Tensor-python_int", ["add.Tensor"], lambda: (rand(6, 5),), lambda a: a + 1),
    case("rsub.Scalar", ["rsub.Scalar"], lambda: (rand(6, 5),), lambda a: 1.5 - a),
    case("div.Tensor_mode-floor-int64", ["div.Tensor_mode"],
         lambda: (rand(5, 7, dtype=i64), rand(5, 7, dtype=i64, seed=1, low=1, high=5)),
         lambda a, b: torch.div(a, b, rounding_mode="floor")),
    case("pow.Tensor_Scalar", ["pow.Tensor_Scalar"], lambda: (rand(4, 9),), lambda a: a ** 3),
    case("lerp.Scalar", ["lerp.Scalar"], lambda: (rand(4, 9), rand(4, 9, seed=1)),
         lambda a, b: torch.lerp(a, b, 0.25)),
    case("addcmul-0dim_self_broadcast", ["addcmul"], lambda: (torch.tensor(1.5), rand(4, 1, seed=1), rand(9, seed=2)),
         lambda a, b, c: torch.addcmul(a, b, c, value=0.5)),
    case("addcmul-value", ["addcmul"], lambda: (rand(4, 9), rand(4, 9, seed=1), rand(4, 9, seed=2)),
         lambda a, b, c: torch.addcmul(a, b, c, value=-0.5)),
    # type promotion
    case("add.Tensor-int64+float32", ["add.Tensor"],
         lambda: (rand(4, 6, dtype=i64), rand(4, 6)), lambda a, b: a + b),
    case("add.Tensor-float32+float64", ["add.Tensor"],
         lambda: (rand(4, 6), rand(4, 6, dtype=f64, seed=1)), lambda a, b: a + b),
    case("add.Tensor-int64+python_float", ["add.Tensor"],
         lambda: (rand(4, 6, dtype=i64),), lambda a: a + 1.5),
    case("mul.Tensor-bool*float", ["mul.Tensor"],
         lambda: (rand(4, 6, dtype=b8), rand(4, 6)), lambda a, b: a * b),
    case("div.Tensor-int64/int64->float", ["div.Tensor"],
         lambda: (rand(4, 6, dtype=i64), rand(4, 6, dtype=i64, seed=1, low=1, high=7)), lambda a, b: a / b),
    case("add.Tensor-0dim_float64+float32", ["add.Tensor"],
         lambda: (rand(4, 6), torch.tensor(2.5, dtype=f64)), lambda a, b: a + b),
    # unary, other dtypes
    case("abs-int64", ["abs"], lambda: (rand(5, 5, dtype=i64),), torch.abs),
    case("neg-float64", ["neg"], lambda: (rand(5, 5, dtype=f64),), torch.neg),
    case("exp-float64", ["exp"], lambda: (rand(5, 5, dtype=f64),), torch.exp),
    case("gelu-tanh", ["gelu"], lambda: (rand(5, 5),),
         lambda a: torch.nn.functional.gelu(a, approximate="tanh")),
    case("silu", ["silu"], lambda: (rand(5, 5),), torch.nn.functional.silu),
    case("logical_not-bool", ["logical_not"], lambda: (rand(5, 5, dtype=b8),), torch.logical_not),
    case("bitwise_and.Tensor-bool", ["bitwise_and.Tensor"],
         lambda: (rand(5, 5, dtype=b8), rand(5, 5, dtype=b8, seed=1)), lambda a, b: a & b),
    case("bitwise_and.Scalar-int64", ["bitwise_and.Scalar"], lambda: (rand(5, 5, dtype=i64),), lambda a: a & 3),
    case("eq.Scalar", ["eq.Scalar"], lambda: (rand(5, 5, dtype=i64),), lambda a: a == 2),
    case("gt.Scalar-float64", ["gt.Scalar"], lambda: (rand(5, 5, dtype=f64),), lambda a: a > 0.1),
    # non-contiguous, zero-size, broadcasting
    case("add.Tensor-transposed", ["add.Tensor"],
         lambda: (rand(7, 5), rand(5, 7, seed=1)), lambda a, b: a.t() + b),
    case("add.Tensor-step_slices", ["add.Tensor"],
         lambda: (rand(10, 12), rand(10, 12, seed=1)), lambda a, b: a[::2, 1::3] + b[1::2, ::3]),
    case("mul.Tensor-expanded", ["mul.Tensor"],
         lambda: (rand(6, 1), rand(1, 5, seed=1)), lambda a, b: a.expand(6, 5) * b.expand(6, 5)),
    case("add.Tensor-broadcast_3d", ["add.Tensor"],
         lambda: (rand(4, 1, 5), rand(3, 1, seed=1)), lambda a, b: a + b),
    case("add.Tensor-zero_size", ["add.Tensor"],
         lambda: (rand(0, 5), rand(0, 5, seed=1)), lambda a, b: a + b),
    case("exp-zero_size", ["exp"], lambda: (rand(3, 0),), torch.exp),
    case("sigmoid-transposed_3d", ["sigmoid"], lambda: (rand(4, 5, 6),), lambda a: torch.sigmoid(a.permute(2, 0, 1))),
    # reductions: int[] dims, keepdim, dtypes
    case("sum.dim_IntList-dims02-keepdim", ["sum.dim_IntList"], lambda: (rand(4, 5, 6),),
         lambda a: a.sum((0, 2), keepdim=True)),
    case("sum.dim_IntList-neg_dim", ["sum.dim_IntList"], lambda: (rand(4, 5, 6),), lambda a: a.sum(-1)),
    case("sum.default", ["sum"], lambda: (rand(9, 11),), lambda a: a.sum()),
    case("sum.default-bool->int64", ["sum"], lambda: (rand(9, 11, dtype=b8),), lambda a: a.sum()),
    case("sum.dim_IntList-int64", ["sum.dim_IntList"], lambda: (rand(9, 11, dtype=i64),), lambda a: a.sum(0)),
    case("sum.dim_IntList-transposed", ["sum.dim_IntList"], lambda: (rand(9, 11),), lambda a: a.t().sum(1)),
    case("sum.dim_IntList-zero_size", ["sum.dim_IntList"], lambda: (rand(0, 4),), lambda a: a.sum(0)),
    case("mean.dim-keepdim", ["mean.dim"], lambda: (rand(4, 5, 6),), lambda a: a.mean([1], keepdim=True)),
    case("mean.dim-float64", ["mean.dim"], lambda: (rand(4, 5, 6, dtype=f64),), lambda a: a.mean((0, 1))),
    case("amax-dims02", ["amax"], lambda: (rand(4, 5, 6),), lambda a: a.amax((0, 2))),
    case("amax-int64-keepdim", ["amax"], lambda: (rand(4, 5, dtype=i64),), lambda a: a.amax(1, keepdim=True)),
    case("var.correction-unbiased", ["var.correction"], lambda: (rand(6, 8),), lambda a: a.var(1)),
    case("var.correction-0-keepdim", ["var.correction"], lambda: (rand(6, 8),),
         lambda a: torch.var(a, dim=0, correction=0, keepdim=True)),
    case("std.correction", ["std.correction"], lambda: (rand(6, 8),), lambda a: a.std(1)),
    case("max.dim-values_indices", ["max.dim"], lambda: (rand(6, 8),), lambda a: tuple(a.max(1))),
    case("argmax", ["argmax"], lambda: (rand(6, 8),), lambda a: a.argmax(0)),
    case("any.dim-bool", ["any.dim"], lambda: (rand(6, 8, dtype=b8),), lambda a: a.any(1)),
    # softmax / log_softmax
    case("_softmax-last", ["_softmax"], lambda: (rand(7, 33),), lambda a: torch.softmax(a, -1)),
    case("_softmax-dim0-float64", ["_softmax"], lambda: (rand(7, 33, dtype=f64),), lambda a: torch.softmax(a, 0)),
    case("_softmax-transposed", ["_softmax"], lambda: (rand(7, 33),), lambda a: torch.softmax(a.t(), -1)),
    case("_log_softmax", ["_log_softmax"], lambda: (rand(7, 33),), lambda a: torch.log_softmax(a, 1)),
    case("native_layer_norm", ["native_layer_norm"], lambda: (rand(6, 16), rand(16, seed=1), rand(16, seed=2)),
         lambda a, w, b: torch.nn.functional.layer_norm(a, (16,), w, b)),
    # where
    case("where.self", ["where.self"], lambda: (rand(5, 6, dtype=b8), rand(5, 6), rand(5, 6, seed=1)),
         torch.where),
    case("where.self-broadcast_int64", ["where.self"],
         lambda: (rand(5, 1, dtype=b8), rand(1, 6, dtype=i64), rand(5, 6, dtype=i64, seed=1)), torch.where),
    case("where.self-promote_f32_f64", ["where.self"],
         lambda: (rand(5, 6, dtype=b8), rand(5, 6), rand(5, 6, dtype=f64, seed=1)), torch.where),
    case("masked_fill.Scalar", ["masked_fill.Scalar"], lambda: (rand(5, 6), rand(5, 6, dtype=b8)),
         lambda a, m: a.masked_fill(m, -2.0)),
    # clamp with None bounds
    case("clamp-min_only", ["clamp"], lambda: (rand(5, 6),), lambda a: torch.clamp(a, min=0.0)),
    case("clamp-max_only", ["clamp"], lambda: (rand(5, 6),), lambda a: torch.clamp(a, max=0.25)),
    case("clamp-both-float64", ["clamp"], lambda: (rand(5, 6, dtype=f64),), lambda a: a.clamp(-0.5, 0.5)),
    case("clamp-int64-min_only", ["clamp"], lambda: (rand(5, 6, dtype=i64),), lambda a: a.clamp(min=2)),
    case("clamp.Tensor-max_only", ["clamp.Tensor"], lambda: (rand(5, 6), rand(6, seed=1)),
         lambda a, hi: torch.clamp(a, max=hi)),
    # Tensor[] inputs
    case("cat-dim0", ["cat"], lambda: (rand(2, 5), rand(3, 5, seed=1)), lambda a, b: torch.cat([a, b])),
    case("cat-dim1-three", ["cat"], lambda: (rand(4, 2), rand(4, 3, seed=1), rand(4, 1, seed=2)),
         lambda a, b, c: torch.cat([a, b, c], dim=1)),
    case("cat-noncontiguous", ["cat"], lambda: (rand(5, 4), rand(4, 5, seed=1)),
         lambda a, b: torch.cat([a.t(), b[:, ::1]], 0)),
    case("cat-int64+float32", ["cat"], lambda: (rand(2, 5, dtype=i64), rand(3, 5)),
         lambda a, b: torch.cat([a, b])),
    case("cat-with_zero_size", ["cat"], lambda: (rand(0, 5), rand(3, 5, seed=1)), lambda a, b: torch.cat([a, b])),
    case("stack-dim1", ["stack"], lambda: (rand(4, 5), rand(4, 5, seed=1), rand(4, 5, seed=2)),
         lambda a, b, c: torch.stack([a, b, c], 1)),
    case("stack-int64", ["stack"], lambda: (rand(4, dtype=i64), rand(4, dtype=i64, seed=1)),
         lambda a, b: torch.stack([a, b])),
    # indexing
    case("index_select-dim0", ["index_select"], lambda: (rand(6, 5), torch.tensor([4, 0, 0, 2])),
         lambda a, i: a.index_select(0, i)),
    case("index_select-dim1-int64", ["index_select"], lambda: (rand(6, 5, dtype=i64), torch.tensor([3, 1])),
         lambda a, i: torch.index_select(a, 1, i)),
    case("gather-dim1", ["gather"], lambda: (rand(4, 6), rand(4, 3, dtype=i64, low=0, high=6)),
         lambda a, i: a.gather(1, i)),
    case("gather-dim0-transposed", ["gather"], lambda: (rand(6, 4), rand(2, 6, dtype=i64, low=0, high=4)),
         lambda a, i: torch.gather(a.t(), 0, i)),
    # matmul family
    case("mm", ["mm"], lambda: (rand(5, 7), rand(7, 3, seed=1)), torch.mm),
    case("mm-transposed-float64", ["mm"], lambda: (rand(7, 5, dtype=f64), rand(3, 7, dtype=f64, seed=1)),
         lambda a, b: a.t() @ b.t()),
    case("addmm-beta_alpha", ["addmm"], lambda: (rand(5, 3), rand(5, 7, seed=1), rand(7, 3, seed=2)),
         lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0)),
    case("addmm-broadcast_bias", ["addmm"], lambda: (rand(3), rand(5, 7, seed=1), rand(7, 3, seed=2)),
         lambda c, a, b: torch.addmm(c, a, b)),
    case("bmm", ["bmm"], lambda: (rand(2, 4, 6), rand(2, 6, 3, seed=1)), torch.bmm),
    case("mv", ["mv"], lambda: (rand(4, 6), rand(6, seed=1)), torch.mv),
    # two ops in one enabled block
    case("mm+add.Tensor", ["mm", "add.Tensor"], lambda: (rand(5, 7), rand(7, 3, seed=1), rand(3, seed=2)),
         lambda a, b, c: a @ b + c),
]


@pytest.mark.parametrize("setup,call,ops", CASES)
def test_op(setup, call, ops):
    check(setup, call, ops)


# --------------------------------------------------------------------- in-place
INPLACE = [
    case("add_.Tensor", ["add_.Tensor"], lambda: (rand(5, 6), rand(5, 6, seed=1)), lambda x, y: x.add_(y)),
    case("add_.Tensor-alpha-broadcast", ["add_.Tensor"], lambda: (rand(5, 6), rand(6, seed=1)),
         lambda x, y: x.add_(y, alpha=-2.0)),
    case("mul_.Tensor", ["mul_.Tensor"], lambda: (rand(5, 6), rand(5, 6, seed=1)), lambda x, y: x.mul_(y)),
    case("mul_.Tensor-python_scalar", ["mul_.Tensor"], lambda: (rand(5, 6),), lambda x: x.mul_(3.0)),
    case("mul_.Tensor-float64", ["mul_.Tensor"], lambda: (rand(5, 6, dtype=f64), rand(5, 6, seed=1)),
         lambda x, y: x.mul_(y)),
    case("add_.Tensor-int64", ["add_.Tensor"], lambda: (rand(5, 6, dtype=i64), rand(5, 6, dtype=i64, seed=1)),
         lambda x, y: x.add_(y)),
    case("clamp_-min_only", ["clamp_"], lambda: (rand(5, 6),), lambda x: x.clamp_(min=0.0)),
    case("add_.Tensor-transposed_self", ["add_.Tensor"], lambda: (rand(6, 5), rand(5, 6, seed=1)),
         lambda x, y: x.t().add_(y)),
    case("mul_.Tensor-step_slice_self", ["mul_.Tensor"], lambda: (rand(8, 6), rand(4, 3, seed=1)),
         lambda x, y: x[::2, 1::2].mul_(y)),
]


@pytest.mark.parametrize("setup,call,ops", INPLACE)
def test_inplace(setup, call, ops):
    native_args = setup()
    expected = call(*native_args)

    eagerc.reset_stats()
    compiled_args = setup()
    self_tensor = compiled_args[0]
    ptr, untouched = self_tensor.data_ptr(), compiled_args[1:]
    before = [t.clone() for t in untouched]
    with eagerc.enabled("cpu", ops=ops):
        result = call(*compiled_args)
    assert_compiled_ran(ops)
    # The result is the written argument (a view of self in the view cases) and
    # self's storage holds the new values.
    assert result.data_ptr() == expected.data_ptr() - native_args[0].data_ptr() + ptr
    assert result.untyped_storage().data_ptr() == self_tensor.untyped_storage().data_ptr()
    assert_close(result, expected)
    assert_close(self_tensor, native_args[0])
    for t, b in zip(untouched, before):
        assert_close(t, b)


def test_inplace_returns_the_same_tensor_object():
    x, y = rand(4, 4), rand(4, 4, seed=1)
    want = x + y
    eagerc.reset_stats()
    with eagerc.enabled("cpu", ops=["aten::add_.Tensor"]):
        r = x.add_(y)
    assert_compiled_ran(["add_.Tensor"])
    assert r is x
    assert_close(x, want)


# ------------------------------------------------------------------------- out=
OUT_CASES = [
    case("add.out", ["add.out"], lambda: (rand(5, 6), rand(5, 6, seed=1), torch.empty(5, 6)),
         lambda a, b, o: torch.add(a, b, out=o)),
    case("add.out-alpha-broadcast", ["add.out"], lambda: (rand(5, 6), rand(6, seed=1), torch.empty(5, 6)),
         lambda a, b, o: torch.add(a, b, alpha=0.5, out=o)),
    case("mul.out-float64", ["mul.out"],
         lambda: (rand(5, 6, dtype=f64), rand(5, 6, dtype=f64, seed=1), torch.empty(5, 6, dtype=f64)),
         lambda a, b, o: torch.mul(a, b, out=o)),
    case("add.out-noncontiguous_out", ["add.out"], lambda: (rand(5, 6), rand(5, 6, seed=1), torch.empty(6, 5)),
         lambda a, b, o: torch.add(a, b, out=o.t())),
    case("add.out-empty_out_resized", ["add.out"], lambda: (rand(5, 6), rand(5, 6, seed=1), torch.empty(0)),
         lambda a, b, o: torch.add(a, b, out=o)),
]


@pytest.mark.parametrize("setup,call,ops", OUT_CASES)
def test_out(setup, call, ops):
    expected = call(*setup())
    eagerc.reset_stats()
    args = setup()
    with eagerc.enabled("cpu", ops=ops):
        result = call(*args)
    assert_compiled_ran(ops)
    out = args[-1]
    assert result.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
    assert result.shape == expected.shape and result.stride() == expected.stride()
    assert_close(result, expected)


def test_out_returns_the_out_tensor_object():
    a, b, o = rand(3, 4), rand(3, 4, seed=1), torch.empty(3, 4)
    want = a + b
    eagerc.reset_stats()
    with eagerc.enabled("cpu", ops=["aten::add.out"]):
        r = torch.add(a, b, out=o)
    assert_compiled_ran(["add.out"])
    assert r is o
    assert_close(o, want)


# -------------------------------------------------------- the overloads reached
# The hand-written cases name the overload each call reaches at the CPU key; a
# wrong name would only show up as "never reached eagerc". Check the names directly.
@pytest.mark.parametrize("setup,call,ops", [pytest.param(*p.values, id=p.id) for p in CASES + INPLACE + OUT_CASES])
def test_case_names_the_reached_overloads(setup, call, ops):
    reached = set(reached_ops(call, *setup()))
    assert {_qualify(o) for o in ops} <= reached, reached
