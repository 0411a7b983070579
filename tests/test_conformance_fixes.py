"""Ops TorchCTS found computing other values than eager (docs/conformance.md), on the
inputs where they did: infinities, NaN, signed zeros, float16's largest value, clamp
bounds. Each call runs on the eagerc device and in override mode (enable("cpu")) and is
compared with CPU eager exactly (signed zeros included) where eager's kernel is exact.

Where Inductor can compute ATen's values (floor_divide in float32/float64, and in a half
type over a one-value divisor: codegen/cpp/cpu_decompositions.py) the compiled kernel must
serve; where it cannot (compile/known_wrong.py) the call must run eager's kernel.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

INF, NAN = float("inf"), float("nan")
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
HALF = (torch.float16, torch.bfloat16)
MODES = ["device", "override"]


def _spread(values, dtype):
    """The values repeated to 37 elements: the kernels' vector loops and their tails."""
    t = torch.tensor(values, dtype=torch.float64).to(dtype)
    return t.repeat(37 // t.numel() + 1)[:37]


def run(mode, op_names, fn, *args):
    """fn(*args) on the eagerc device or in override mode serving `op_names`, on CPU."""
    eagerc.reset_stats()
    if mode == "device":
        out = fn(*[a.to("eagerc") if isinstance(a, torch.Tensor) else a for a in args])
        assert out.device.type == "eagerc"
        return out.cpu()
    assert not eagerc._C._is_enabled("CPU"), "a previous test left eagerc enabled"
    with eagerc.enabled("cpu", ops=op_names):
        return fn(*args)


def op_stats(mode, op):
    key = f"aten::{op}@" + ("PrivateUse1" if mode == "device" else "CPU")
    stats = eagerc.stats()["ops"].get(key)
    assert stats is not None, f"{key} never reached eagerc: {sorted(eagerc.stats()['ops'])}"
    return stats


def assert_compiled(mode, op):
    s = op_stats(mode, op)
    assert s["fallbacks"] == 0, s["fallback_reasons"]
    assert s.get("aliased", 0) == 0


def assert_refused(mode, op, why):
    s = op_stats(mode, op)
    assert s["fallbacks"] > 0 and why in " ".join(s["fallback_reasons"]), s["fallback_reasons"]


def assert_same(actual, expected):
    """Exact as values: equal, NaN where NaN, and the same sign of every zero (a NaN's
    sign is no value: ATen's bfloat16 conversion makes every NaN positive)."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    numbers = ~torch.isnan(expected)
    assert torch.equal(torch.signbit(actual[numbers]), torch.signbit(expected[numbers])), (actual, expected)


# --------------------------------------------------------------------------- nextafter

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter(dtype, mode):
    big = torch.finfo(dtype).max
    x = _spread([1.0, big, -big, 0.0, -0.0, INF, -INF, NAN, 1.0, 2.0, -1.0], dtype)
    y = _spread([-INF, INF, -INF, 1.0, -1.0, 0.0, 0.0, 1.0, NAN, 2.0, 0.0], dtype)
    assert_same(run(mode, ["aten::nextafter"], torch.nextafter, x, y), torch.nextafter(x, y))
    if dtype in HALF:
        assert_refused(mode, "nextafter", "nextafter in float32")
    else:
        assert_compiled(mode, "nextafter")


# --------------------------------------------------------------------------- logit

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_logit_with_eps(dtype, mode):
    x = _spread([0.0, 1.0, 1 - 1e-7, 1e-7, 0.5, -1.0, 2.0, NAN, 0.25, 0.999], dtype)
    fn = lambda t: torch.logit(t, 1e-6)  # noqa: E731
    actual, expected = run(mode, ["aten::logit"], fn, x), fn(x)
    assert torch.equal(torch.isinf(actual), torch.isinf(expected)), (actual, expected)
    assert_close(actual, expected, equal_nan=True)
    if dtype in HALF:
        assert torch.isinf(actual[1]), "logit(1, eps=1e-6) is inf where 1 - eps rounds to 1"
        assert_same(actual, expected)  # eager's own kernel served
        assert_refused(mode, "logit", "logit to 1 - eps")
    else:
        assert_compiled(mode, "logit")


# --------------------------------------------------------------------------- floor division

_DIVIDENDS = [INF, -INF, NAN, 5.0, -5.0, 0.0, -0.0, 7.0, -7.0, 1.0, -1.0, 3.0, 60000.0, 0.3, 2049.7]
_DIVISORS = [2.0, 2.0, 2.0, INF, INF, -3.0, 3.0, -INF, -INF, 0.1, 0.1, 0.0, 0.001, 0.1, -0.3]

_FLOOR_DIVISIONS = {
    "floor_divide": ("floor_divide", torch.floor_divide),
    "div_floor": ("div.Tensor_mode", lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "floor_divide_": ("floor_divide_.Tensor", lambda a, b: a.clone().floor_divide_(b)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(_FLOOR_DIVISIONS))
def test_floor_divide_tensor(name, dtype, mode):
    op, fn = _FLOOR_DIVISIONS[name]
    a, b = _spread(_DIVIDENDS, dtype), _spread(_DIVISORS, dtype)
    assert_same(run(mode, ["aten::" + op], fn, a, b), fn(a, b))
    if dtype in HALF:
        assert_refused(mode, op, "half type")
    else:
        assert_compiled(mode, op)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("divisor", [2.0, -0.0, 0.1, INF, -3.0])
def test_floor_divide_one_value(divisor, dtype, mode):
    """A Python number (floor_divide.Scalar, or wrapped as floor_divide's Tensor) or a
    one-element tensor as divisor: compiled in every dtype, half types computing in
    float32 as ATen does."""
    a = _spread(_DIVIDENDS, dtype)
    scalar = lambda t: torch.ops.aten.floor_divide.Scalar(t, divisor)  # noqa: E731
    assert_same(run(mode, ["aten::floor_divide.Scalar"], scalar, a), scalar(a))
    assert_compiled(mode, "floor_divide.Scalar")
    wrapped = lambda t: torch.floor_divide(t, divisor)  # noqa: E731
    assert_same(run(mode, ["aten::floor_divide"], wrapped, a), wrapped(a))
    assert_compiled(mode, "floor_divide")
    b = torch.tensor([divisor], dtype=dtype)
    assert_same(run(mode, ["aten::floor_divide"], torch.floor_divide, a, b), torch.floor_divide(a, b))
    assert_compiled(mode, "floor_divide")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_floor_divide_random_magnitudes(dtype):
    """Quotients whose a / b rounds to or past an integer, overflows or underflows."""
    g = torch.Generator().manual_seed(0)
    n = 4099
    a = torch.randn(n, generator=g, dtype=torch.float64) * torch.pow(10.0, torch.randint(-40, 40, (n,), generator=g))
    b = torch.randn(n, generator=g, dtype=torch.float64) * torch.pow(10.0, torch.randint(-40, 40, (n,), generator=g))
    a, b = a.to(dtype), b.to(dtype)
    assert_same(run("device", None, torch.floor_divide, a, b), torch.floor_divide(a, b))
    assert_compiled("device", "floor_divide")


def test_integer_floor_divide_keeps_eager_errors():
    a = torch.tensor([7, -7, 5])
    assert torch.equal(run("device", None, torch.floor_divide, a, torch.tensor([2, 2, -3])),
                       torch.floor_divide(a, torch.tensor([2, 2, -3])))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.floor_divide(a.to("eagerc"), torch.tensor([2, 0, 1], device="eagerc"))


# --------------------------------------------------------------------------- eager's own values

# TorchCTS's i0, float_power.Tensor_Tensor and ldexp.Tensor failures hold against ATen's
# CPU kernels too (docs/conformance.md): its references are mpmath's i0 (inf at inf, where
# ATen's is NaN) and exact integer powers and exponent scalings of complex lanes. The
# device's answer is eager's.

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_i0_is_eagers_at_infinities(dtype, mode):
    x = _spread([INF, -INF, NAN, 0.0, -1.0, 3.0, 20.0, 89.0, 700.0, 1e4], dtype)
    actual, expected = run(mode, ["aten::i0"], torch.i0, x), torch.i0(x)
    assert torch.isnan(expected[0]), "ATen's i0(inf) is NaN"
    assert torch.equal(torch.isnan(actual), torch.isnan(expected))
    assert_close(actual, expected, equal_nan=True)
    assert_compiled(mode, "i0")


_COMPLEX = [complex(INF, 0), complex(INF, 1), complex(-INF, 2), complex(1, INF), complex(NAN, 0), 0j,
            complex(2, 3), complex(0.5, -0.25)]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_float_power_and_ldexp_are_eagers(dtype):
    base = torch.tensor(_COMPLEX, dtype=dtype)
    exponent = torch.tensor([2, 3, 2, 2, 1, 0, 4, 5], dtype=dtype)
    scale = torch.tensor([1, 2, 0, -1, 3, 10, 0, 0])
    for fn, other in ((torch.float_power, exponent), (torch.ldexp, scale)):
        actual = run("device", None, fn, base, other)
        expected = fn(base, other)
        torch.testing.assert_close(torch.view_as_real(actual), torch.view_as_real(expected),
                                   rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_add_sub_pow_in_place_and_out_are_eagers(dtype):
    """TorchCTS's complex_unit_alpha_add_sub and complex_tensor_integer_power references
    add and subtract the parts separately and patch exact integer powers; ATen's CPU
    kernels multiply by alpha = 1+0j (inf+0j becomes inf+nanj) and take pow's general
    path. The device's values are eager's in every form."""
    left = torch.tensor(_COMPLEX, dtype=dtype)
    right = left.flip(0)
    forms = [lambda a, b: torch.sub(a, b), lambda a, b: torch.rsub(a, b),
             lambda a, b: a.clone().add_(b), lambda a, b: a.clone().sub_(b),
             lambda a, b: torch.add(a, b, out=torch.empty_like(a)),
             lambda a, b: torch.sub(a, b, out=torch.empty_like(a)),
             lambda a, b: a.clone().pow_(b), lambda a, b: torch.pow(a, b, out=torch.empty_like(a))]
    for form in forms:
        actual = run("device", None, form, left, right)
        torch.testing.assert_close(torch.view_as_real(actual), torch.view_as_real(form(left, right)),
                                   rtol=0, atol=0, equal_nan=True)


def _with_infinities(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=torch.float64)
    flat = t.view(-1)
    flat[::5], flat[2::7] = INF, -INF
    flat[3::11] = NAN
    return t.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_products_of_infinities_are_eagers(dtype):
    """TorchCTS's matmul_family_reference puts NaN and infinities elsewhere than ATen's
    (BLAS) products of infinite inputs, so the manifest does not claim its NaN/Inf contract
    for them: the device's products are CPU eager's, NaN and infinite positions included,
    in the in-place and out= forms TorchCTS tests."""
    m, a, b = (_with_infinities(s, dtype, i) for i, s in enumerate(((3, 5), (3, 4), (4, 5))))
    bm, ba, bb = (_with_infinities(s, dtype, 7 + i) for i, s in enumerate(((3, 5), (2, 3, 4), (2, 4, 5))))
    bbm = _with_infinities((2, 3, 5), dtype, 11)
    forms = {
        "addmm_": (lambda m, a, b: m.clone().addmm_(a, b), (m, a, b)),
        "addbmm_": (lambda m, a, b: m.clone().addbmm_(a, b), (bm, ba, bb)),
        "baddbmm_": (lambda m, a, b: m.clone().baddbmm_(a, b), (bbm, ba, bb)),
        "addmm.out": (lambda m, a, b: torch.addmm(m, a, b, out=torch.empty_like(m)), (m, a, b)),
        "mm.out": (lambda a, b: torch.mm(a, b, out=torch.empty(3, 5, dtype=a.dtype, device=a.device)), (a, b)),
        "matmul.out": (lambda a, b: torch.matmul(a, b, out=torch.empty(2, 3, 5, dtype=a.dtype, device=a.device)), (ba, bb)),
        "linear.out": (lambda a, w: torch._C._nn.linear(a, w, out=torch.empty(3, 5, dtype=a.dtype, device=a.device)),
                       (a, b.t().contiguous())),
        "chain_matmul.out": (lambda a, b, c: torch.chain_matmul(a, b, c, out=torch.empty(3, 3, dtype=a.dtype, device=a.device)),
                             (a, b, m.t().contiguous())),
    }
    for name, (form, args) in forms.items():
        expected = form(*args)
        assert torch.isnan(expected).any() or torch.isinf(expected).any(), name
        actual = run("device", None, form, *args)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=name)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_conj_physical_in_place(dtype):
    """conj_physical_'s composite kernel calls conj_physical_stub for a complex self, which
    has no PrivateUse1 entry ("DispatchStub: missing kernel for eagerc"): the call runs on
    the host memory's CPU kernel instead."""
    values = torch.tensor(_COMPLEX, dtype=dtype)
    device = values.to("eagerc")
    assert device.conj_physical_() is device
    expected = values.clone().conj_physical_()
    torch.testing.assert_close(torch.view_as_real(device.cpu()), torch.view_as_real(expected),
                               rtol=0, atol=0, equal_nan=True)
    strided = torch.tensor(_COMPLEX * 2, dtype=dtype)
    base = strided.to("eagerc")
    base[::2].conj_physical_()  # written through the view into its base
    strided[::2].conj_physical_()
    torch.testing.assert_close(torch.view_as_real(base.cpu()), torch.view_as_real(strided),
                               rtol=0, atol=0, equal_nan=True)


# --------------------------------------------------------------------------- remainder

_REMAINDERS = {
    "remainder.Tensor": lambda a, b: torch.remainder(a, b),
    "remainder_.Tensor": lambda a, b: a.clone().remainder_(b),
    "remainder.Tensor_out": lambda a, b: torch.remainder(a, b, out=torch.empty_like(a)),
    "remainder.Scalar_Tensor": lambda a, b: torch.remainder(-5.0, b),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(_REMAINDERS))
def test_floating_remainder_is_eagers(op, dtype, mode):
    """Inductor's remainder is a - floor(a / b) * b: NaN by an infinite divisor
    (remainder(1.5, inf): eager 1.5), 0 by a tiny one (remainder(1.5, 1e-30): eager
    5.9e-31). Floating remainder runs eager's kernel (known_wrong.py)."""
    fn = _REMAINDERS[op]
    a = _spread([1.5, 0.0, -5.0, 1.5, -1.5, 7.0, INF, NAN, 5.0, -0.0], dtype)
    b = _spread([INF, INF, -INF, 1e-30, 1e-30, -3.0, 2.0, 2.0, 0.0, 3.0], dtype)
    assert_same(run(mode, ["aten::" + op], fn, a, b), fn(a, b))
    # The out= form runs through its functional op's kernel: the refusal is that op's.
    assert_refused(mode, op.replace("Tensor_out", "Tensor"), "floating remainder")


def test_integer_remainder_still_compiles():
    a = torch.tensor([7, -7, 5, -5, 0, 9] * 6)
    b = torch.tensor([3, 3, -2, -2, 4, 10] * 6)
    assert_same(run("device", None, torch.remainder, a, b), torch.remainder(a, b))
    assert_compiled("device", "remainder.Tensor")


_GELUS = {
    "gelu": lambda x, g: torch.nn.functional.gelu(x),
    "gelu_": lambda x, g: torch.ops.aten.gelu_(x.clone()),
    "gelu.out": lambda x, g: torch.ops.aten.gelu.out(x, out=torch.empty_like(x)),
    "gelu_backward": lambda x, g: torch.ops.aten.gelu_backward(g, x),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(_GELUS))
def test_gelu_is_eagers(op, dtype, mode):
    """ATen's CPU gelu of a contiguous float32/bfloat16 tensor is oneDNN's: gelu(inf) is
    NaN, gelu(3e38) inf, the backward's tails differ from the compiled kernel's. Those
    calls run eager's kernel (known_wrong.py); float16 and float64 compile."""
    fn = _GELUS[op]
    x = _spread([INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0, 3e38, -3e38, 10.0, -10.0, -5.5, 1e-30], dtype)
    g = torch.linspace(-2, 2, x.numel()).to(dtype)
    assert_same(run(mode, ["aten::" + op], fn, x, g), fn(x, g))
    if dtype in (torch.float32, torch.bfloat16):
        assert_refused(mode, op.split(".")[0], "oneDNN")
    else:
        assert_compiled(mode, op.split(".")[0])


class _StillCompiling:
    """A compile service that takes every job and finishes none (as in
    tests/test_interim_answers.py): every background miss is answered in the interim, with
    no service process started (a process importing the compiler)."""

    def submit(self, folder, job_id, data) -> bool:
        return True

    def outcome(self, folder, job_id):
        return None


@pytest.mark.parametrize("compile_mode", ["background", "now"])
def test_a_cpu_tensor_among_the_devices_raises_as_eager(compile_mode, fresh_cache, monkeypatch):
    """TorchCTS level 3's test_error_handling_cross_device: add/sub/mul of a CPU and an
    eagerc tensor raise eager's device error; a 0-dim CPU tensor is a scalar. In background
    mode a miss was answered in the interim, on aliases, with no device check."""
    from eagerc.per_op import background

    monkeypatch.setenv("EAGERC_COMPILE", compile_mode)
    if compile_mode == "background":
        monkeypatch.setattr(background, "client", lambda: _StillCompiling())
        monkeypatch.setattr(background, "_jobs", background.Jobs())
    x_cpu, x_dev = torch.randn(5), torch.randn(5).to("eagerc")
    for op in (torch.add, torch.sub, torch.mul):
        for a, b, devices in ((x_cpu, x_dev, "cpu and eagerc:0"), (x_dev, x_cpu, "eagerc:0 and cpu")):
            for _ in range(2):  # a second call of the signature too
                with pytest.raises(RuntimeError, match=f"Expected all tensors to be on the same "
                                                       f"device, but found at least two devices, {devices}!"):
                    op(a, b)
        assert_close(op(x_dev, torch.tensor(2.0)).cpu(), op(x_dev.cpu(), torch.tensor(2.0)))
    if compile_mode == "background":  # the misses were background ones, answered meanwhile
        assert eagerc.stats()["interim"] > 0 and eagerc.stats()["compiles"] == 0, eagerc.stats()


def test_lanczos_upsampling_of_nan_and_inf_is_eagers():
    """TorchCTS level 3 compares _upsample_lanczos2d_aa on NaN/inf inputs with its own
    reference (lanczos3_exact_zero); the device runs ATen's CPU kernel (no lowering)."""
    torch.manual_seed(0)
    x = torch.randn(1, 3, 6, 7)
    x[0, 0, 1, 2], x[0, 1, 3, 3], x[0, 2, 0, 0] = NAN, INF, -INF
    for args in (([4, 9], False, None, None), ([12, 14], True, 1.5, 0.7)):
        got = torch.ops.aten._upsample_lanczos2d_aa(x.to("eagerc"), *args).cpu()
        assert_same(got, torch.ops.aten._upsample_lanczos2d_aa(x, *args))


def test_eval_mode_rrelu_with_noise_returns_the_noise_as_given():
    """TorchCTS level 3's test_rrelu_train_false_variants compares the noise returned by
    each side, two torch.empty_like tensors: eager (and the device) return it unwritten."""
    x = torch.linspace(-2, 2, 12).reshape(3, 4)
    noise = torch.linspace(5, 6, 12).reshape(3, 4)
    want = torch.ops.aten.rrelu_with_noise_functional(x, noise, 0.125, 1 / 3, False, None)
    got = torch.ops.aten.rrelu_with_noise_functional(x.to("eagerc"), noise.to("eagerc"), 0.125, 1 / 3, False, None)
    for g, w in zip(got, want):
        assert_same(g.cpu(), w)
    assert_same(got[1].cpu(), noise)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_multilabel_margin_loss_is_eagers(reduction, mode):
    """Inductor's decomposition counts target positions after a row's first -1 (TorchCTS
    level 3: 2.5x eager's loss); every call runs eager's kernel."""
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0], [0, -1, 1, 2, 3], [4, 3, 1, 0, 2]])

    def fn(a, b):
        return torch.ops.aten.multilabel_margin_loss_forward(a, b, reduction)[0]

    assert_same(run(mode, ["aten::multilabel_margin_loss_forward"], fn, x, t), fn(x, t))
    assert_refused(mode, "multilabel_margin_loss_forward", "after a target's -1")


def test_embedding_bag_frequency_scaled_backward_is_eagers():
    """TorchCTS level 3's embedding_bag(scale_grad_by_freq) contract reference scales each
    row's gradient by the row's count; ATen's CPU kernel, which the device matches,
    gives other values on TorchCTS's input (row 4, seen once, is divided by 3)."""
    def backward(device):
        weight = torch.zeros(5, 2, device=device, requires_grad=True)
        indices, offsets = torch.tensor([1, 1, 2, 1, 2, 4]), torch.tensor([0, 3])
        out = torch.embedding_bag(weight, indices.to(device), offsets.to(device), True, 0, False, None, False)[0]
        out.backward(torch.tensor([[1.0, -0.5], [-0.25, 2.0]]).to(device))
        return weight.grad.cpu()

    assert_same(backward("eagerc"), backward("cpu"))


def _sgd_steps(device, dtype, fused, steps=3, **options):
    """A parameter of 4 x 40 after `steps` SGD steps (a vector loop and its tail)."""
    torch.manual_seed(0)
    weight, x = torch.randn(4, 40).to(dtype), torch.randn(3, 40, dtype=dtype)
    p = torch.nn.Parameter(weight.to(device))
    opt = torch.optim.SGD([p], lr=0.1, fused=fused, **options)
    for _ in range(steps):
        opt.zero_grad()
        (x.to(device) @ p.t()).sum().backward()
        opt.step()
    return p.detach().cpu()


def _cpu_fused_in_float32(dtype, steps=3, **options):
    """CPU's fused SGD run on float32 copies of half-precision parameters, gradients and
    momentum buffers, rounded back after each step: CUDA's fused kernel's math."""
    torch.manual_seed(0)
    weight, x = torch.randn(4, 40).to(dtype), torch.randn(3, 40, dtype=dtype)
    p, buf = weight.clone(), None
    momentum = options.get("momentum", 0.0)
    for step in range(steps):
        grad = (torch.ones(4, 3, dtype=dtype) @ x).to(dtype)  # d(sum(x @ p.T))/dp
        p32, g32 = p.float(), grad.float()
        bufs = [] if momentum == 0 else [buf.float() if buf is not None else torch.empty_like(p32)]
        torch._fused_sgd_([p32], [g32], bufs, weight_decay=options.get("weight_decay", 0.0),
                          momentum=momentum, lr=0.1, dampening=0.0,
                          nesterov=options.get("nesterov", False), maximize=False,
                          is_first_step=step == 0)
        p = p32.to(dtype)
        buf = bufs[0].to(dtype) if bufs else None
    return p


SGD_OPTIONS = [{}, {"momentum": 0.9, "weight_decay": 0.01}, {"momentum": 0.9, "nesterov": True}]


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=["plain", "momentum", "nesterov"])
@pytest.mark.parametrize("dtype", HALF)
def test_fused_sgd_step_updates_half_parameters(dtype, options):
    """TorchCTS level 4's fused SGD pipeline: ATen's CPU fused SGD leaves float16/bfloat16
    parameters unchanged but for its vector loop's tail (torch 2.13), and the device
    inherited that. The device's fused step is CPU's run in float32 and rounded back
    (eagerc/device/fused_sgd.py), close to the unfused step as CUDA's fused kernel is."""
    device = _sgd_steps("eagerc", dtype, True, **options)
    assert torch.equal(device, _cpu_fused_in_float32(dtype, **options))
    unfused = _sgd_steps("cpu", dtype, False, **options)
    torch.testing.assert_close(device, unfused, atol=0.05, rtol=0.02)
    cpu_fused = _sgd_steps("cpu", dtype, True, **options)
    assert not torch.allclose(cpu_fused, unfused, atol=0.05, rtol=0.02), \
        "torch's CPU fused SGD updates half parameters now: eagerc/device/fused_sgd.py can go"


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=["plain", "momentum", "nesterov"])
def test_fused_sgd_step_float32_is_cpus_fused_step(options):
    """Other dtypes run ATen's CPU kernel as they did: equal to CPU's fused step."""
    assert torch.equal(_sgd_steps("eagerc", torch.float32, True, **options),
                       _sgd_steps("cpu", torch.float32, True, **options))


def test_fused_sgd_step_with_grad_scale_unscales_half_gradients():
    """With a grad_scale the kernel writes the unscaled gradients back (GradScaler's fused
    path); found_inf set skips the step, the gradients still unscaled."""
    for found in (0.0, 1.0):
        out = {}
        for device in ("cpu", "eagerc"):
            p = torch.full((40,), 1.0, dtype=torch.float16, device=device)
            g = torch.full((40,), 4.0, dtype=torch.float16, device=device)
            torch._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                              nesterov=False, maximize=False, is_first_step=True,
                              grad_scale=torch.tensor(2.0, device=device),
                              found_inf=torch.tensor(found, device=device))
            out[device] = (p.cpu(), g.cpu())
        assert torch.equal(out["eagerc"][1], out["cpu"][1])  # 2.0 everywhere on both
        expected = torch.full((40,), 1.0 if found else 0.7998, dtype=torch.float16)
        assert torch.equal(out["eagerc"][0], expected), out["eagerc"][0]


# --------------------------------------------------------------------------- cache key

def test_refusals_and_decompositions_are_in_the_cache_key(monkeypatch):
    """A kernel compiled before a call was refused, or before a decomposition changed, is
    not a hit: each version bump changes the cache namespace."""
    from eagerc import kernel_key, targets
    from eagerc.cache import CacheKey

    target = targets.for_device("eagerc")
    key = CacheKey(kind="op", target=target, name="aten::nextafter", signature=b"")
    parts = key.namespace_components()
    assert parts["known_wrong"] == kernel_key.KNOWN_WRONG_VERSION
    assert "codegen.decompositions" in parts  # the C++ code generator's decompositions
    before = key.namespace().digest()
    monkeypatch.setattr(kernel_key, "KNOWN_WRONG_VERSION", kernel_key.KNOWN_WRONG_VERSION + "+")
    assert key.namespace().digest() != before
    monkeypatch.undo()
    settings = target.codegen.compiler_settings()
    monkeypatch.setattr(type(target.codegen), "compiler_settings",
                        lambda self: {**settings, "decompositions": settings["decompositions"] + "+"})
    assert key.namespace().digest() != before
    monkeypatch.undo()
    assert key.namespace().digest() == before


# --------------------------------------------------------------------------- level 3: losses

def _bce_inputs(dtype=torch.float32):
    x = torch.sigmoid(torch.linspace(-1.25, 1.25, 12, dtype=dtype).reshape(3, 4))
    t = torch.sigmoid(torch.linspace(-0.75, 1.75, 12, dtype=dtype).reshape(3, 4))
    return x, t


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("out_shape", [(0,), (3, 4), (12,), (5,)])
def test_binary_cross_entropy_out_reduces_its_out_as_eager(reduction, out_shape):
    """ATen's binary_cross_entropy.out writes the loss into a squeezed view of `out` and
    reduces `out` as given: TorchCTS's empty out gives NaN (mean) on CPU; the device's
    out= form must be eager's, not the functional's result copied in."""
    x, t = _bce_inputs()
    results = []
    for device in ("cpu", "eagerc"):
        out = torch.full(out_shape, 0.25, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # eager's resize warning
            got = torch.ops.aten.binary_cross_entropy.out(x.to(device), t.to(device), None, reduction, out=out)
        assert got is out
        results.append(got.cpu())
    assert results[1].shape == results[0].shape
    assert_close(results[1], results[0], equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_binary_cross_entropy_with_logits_of_infinities_is_eagers(dtype):
    """TorchCTS's bce_with_logits_stable expects inf where ATen's CPU kernel gives NaN
    (logits of both infinities): the device gives eager's NaN, out= and functional."""
    x, t = _bce_inputs(dtype)
    x = torch.logit(x)
    x[0, 3], x[1, 0] = INF, -INF
    expected = torch.ops.aten.binary_cross_entropy_with_logits(x, t, None, None, 1)
    d = torch.ops.aten.binary_cross_entropy_with_logits(x.to("eagerc"), t.to("eagerc"), None, None, 1)
    out = torch.empty(0, dtype=dtype, device="eagerc")
    o = torch.ops.aten.binary_cross_entropy_with_logits.out(x.to("eagerc"), t.to("eagerc"), None, None, 1, out=out)
    assert o is out
    assert_close(d.cpu(), expected, equal_nan=True)
    assert_close(o.cpu(), expected, equal_nan=True)


def _with_nonfinite(shape, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(shape)
    x.view(-1)[::4] = INF
    x.view(-1)[1::7] = -INF
    x.view(-1)[2::5] = NAN
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.7, True), (1, -0.5, True)])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_multi_margin_loss_counts_only_positive_margins_as_eager(reduction, p, margin, weighted, mode):
    """ATen adds a class's term only where z = margin - x[target] + x[d] > 0: a NaN z, or a
    z <= 0 times an infinite weight, is not counted (torch._decomp's clamp_min(z, 0) kept
    NaN, and 0 * inf was NaN: TorchCTS level 3's extra NaN). Compiled code serves."""
    x = _with_nonfinite((6, 5))
    t = torch.tensor([0, 4, 2, 1, 3, 2])
    w = torch.tensor([1.0, INF, 0.5, 0.0, 2.0]) if weighted else None

    def fn(a, b, weight=None):
        return torch.ops.aten.multi_margin_loss(a, b, p, margin, weight, reduction)

    args = (x, t, w) if weighted else (x, t)
    got, want = run(mode, ["aten::multi_margin_loss"], fn, *args), fn(*args)
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    assert_close(got, want, equal_nan=True)
    assert_compiled(mode, "multi_margin_loss")


def test_multi_margin_loss_out_and_one_row_are_eagers():
    x, t = _with_nonfinite((4, 3), seed=1), torch.tensor([2, 0, 1, 1])
    out = torch.empty(0, device="eagerc")
    torch.ops.aten.multi_margin_loss.out(x.to("eagerc"), t.to("eagerc"), 1, 1.0, None, 0, out=out)
    assert_close(out.cpu(), torch.ops.aten.multi_margin_loss(x, t, 1, 1.0, None, 0), equal_nan=True)
    row, target = torch.tensor([0.2, INF, 0.1]), torch.tensor(1)  # 1-d input: a scalar loss
    got = torch.nn.functional.multi_margin_loss(row.to("eagerc"), target.to("eagerc"), reduction="none")
    assert_same(got.cpu(), torch.nn.functional.multi_margin_loss(row, target, reduction="none"))


# --------------------------------------------------------------------------- level 3: pooling, upsampling

def _pool_inputs(shape):
    torch.manual_seed(0)
    nans = torch.randn(shape)
    nans.view(-1)[::3] = NAN  # windows with several NaNs: ATen's index is the last one's
    ties = torch.randint(-1, 2, shape).float()
    ties[ties == 0] = -0.0
    ties.view(-1)[::2] = 0.0  # tied zeros: the first wins, value and sign
    return [nans, ties, torch.full(shape, -INF), _with_nonfinite(shape)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,size,layout", [
    ((2, 3, 7, 9), [3, 4], "contiguous"),     # windows that do not divide the input
    ((2, 5, 7, 9), [3, 4], "channels_last"),
    ((4, 6, 10), [4, 3], "contiguous"),       # 3-d input
    ((2, 3, 4, 5), [1, 1], "contiguous"),     # global pooling
    ((2, 3, 8, 6), [4, 3], "contiguous"),     # dividing windows: max_pool2d_with_indices
    ((2, 3, 7, 9), [7, 9], "contiguous"),     # one-tap windows
])
def test_adaptive_max_pool2d_values_and_indices_are_eagers(shape, size, layout, mode):
    """ATen's loop takes a tap greater than the maximum or NaN: of several NaNs in a window
    the last one's index (Inductor's lowering and global argmax: the first's; TorchCTS
    level 3's adaptive_max_pool2d.out). Values, signs and indices are eager's; compiled."""
    fn = torch.ops.aten.adaptive_max_pool2d
    for x in _pool_inputs(shape):
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        want = fn(x, size)
        eagerc.reset_stats()
        if mode == "device":
            got = tuple(g.cpu() for g in fn(x.to("eagerc"), size))
        else:
            with eagerc.enabled("cpu", ops=["aten::adaptive_max_pool2d"]):
                got = fn(x, size)
        assert_same(got[0], want[0])
        assert torch.equal(got[1], want[1])
        assert (got[0].stride(), got[1].stride()) == (want[0].stride(), want[1].stride())
        assert_compiled(mode, "adaptive_max_pool2d")


def test_adaptive_max_pool2d_out_is_eagers():
    x = _pool_inputs((2, 3, 7, 9))[0]
    out, indices = torch.empty(0, device="eagerc"), torch.empty(0, dtype=torch.long, device="eagerc")
    torch.ops.aten.adaptive_max_pool2d.out(x.to("eagerc"), [3, 4], out=out, indices=indices)
    want, want_indices = torch.ops.aten.adaptive_max_pool2d(x, [3, 4])
    assert_same(out.cpu(), want)
    assert torch.equal(indices.cpu(), want_indices)


@pytest.mark.parametrize("mode", MODES)
def test_uint8_bilinear_upsampling_is_eagers(mode):
    """ATen's uint8 bilinear upsampling is fixed-point (int16 weights, a pass per dim
    rounded to uint8); torch._decomp's rounds a float interpolation, off by 1 in places
    (TorchCTS level 3, compared exactly): these calls run eager's kernel."""
    torch.manual_seed(0)
    x = torch.randint(0, 256, (1, 3, 5, 6), dtype=torch.uint8)

    def fn(a):
        return torch.nn.functional.interpolate(a, size=(7, 9), mode="bilinear")

    assert torch.equal(run(mode, ["aten::upsample_bilinear2d"], fn, x), fn(x))
    assert_refused(mode, "upsample_bilinear2d", "fixed-point")


# --------------------------------------------------------------------------- level 3: fresh empty results

@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_linalg_solve_ex_out_grows_its_empty_lu(dtype):
    """linalg_solve_ex.out makes its LU and pivots with B.new_empty({0}) and lets
    _linalg_solve_ex.result resize them: a fresh empty result answered by a home kernel (a
    miss's interim answer) must be resizable as eager's is."""
    g = torch.Generator().manual_seed(3)
    A = torch.randn(3, 3, generator=g, dtype=dtype)
    B = torch.randn(3, 2, generator=g, dtype=dtype)
    expected = torch.ops.aten.linalg_solve_ex.out(
        A, B, result=torch.empty(0, dtype=dtype), info=torch.empty(0, dtype=torch.int32))
    result = torch.empty(0, dtype=dtype, device="eagerc")
    info = torch.empty(0, dtype=torch.int32, device="eagerc")
    got = torch.ops.aten.linalg_solve_ex.out(A.to("eagerc"), B.to("eagerc"), result=result, info=info)
    assert got[0] is result and got[1] is info
    assert_close(result.cpu(), expected[0])
    assert torch.equal(info.cpu(), expected[1])


@pytest.mark.parametrize("make", [lambda d: torch.zeros(0, device=d),
                                  lambda d: torch.ones(2, device=d).new_empty((0,)),
                                  lambda d: torch.empty(0, device=d) + 1])
def test_fresh_empty_results_are_resizable(make):
    t = make("eagerc")
    assert t.untyped_storage().resizable() == make("cpu").untyped_storage().resizable()
    t.resize_(3, 2)
    assert t.shape == (3, 2) and t.device.type == "eagerc"


def test_tensor_list_out_forms_grow_their_empty_outs():
    """TorchCTS level 3's split_with_sizes_copy.out and unbind_copy.int_out with empty
    outs: ATen's kernel (run on aliases: eagerc does not trace an int[] of SymInts) resizes
    each out; the device's outs stayed empty, with no error."""
    x = torch.randn(6, 4)
    for fn, count in ((lambda t, out: torch.split_with_sizes_copy(t, [2, 4], out=out), 2),
                      (lambda t, out: torch.unbind_copy(t, 0, out=out), 6)):
        want = [torch.empty(0) for _ in range(count)]
        fn(x, want)
        got = [torch.empty(0, device="eagerc") for _ in range(count)]
        fn(x.to("eagerc"), got)
        for g, w in zip(got, want):
            assert g.device.type == "eagerc" and g.shape == w.shape and g.stride() == w.stride()
            assert torch.equal(g.cpu(), w)


@pytest.mark.parametrize("compile_mode", ["background", "now"])
def test_unsafe_split_pieces_alias_self(compile_mode, fresh_cache, monkeypatch):
    """TorchCTS level 3's view-alias tests: unsafe_split's pieces are views of self in eager
    (torch._C._is_alias_of), though its schema marks no alias. Answered in the interim (ATen's
    kernel on aliases) they were tensors of their own over self's bytes."""
    from eagerc.per_op import background

    monkeypatch.setenv("EAGERC_COMPILE", compile_mode)
    if compile_mode == "background":
        monkeypatch.setattr(background, "client", lambda: _StillCompiling())
        monkeypatch.setattr(background, "_jobs", background.Jobs())
    x = torch.randn(6, 4)
    forms = (lambda t: torch.ops.aten.unsafe_split.Tensor(t, 3),
             lambda t: torch.ops.aten.unsafe_split_with_sizes(t, [2, 4]),
             lambda t: torch.ops.aten.unsafe_chunk(t, 3, 1))
    for form in forms:
        for _ in range(2):
            d = x.to("eagerc")
            pieces, want = form(d), form(x)
            assert [torch._C._is_alias_of(p, d) for p in pieces] == [torch._C._is_alias_of(w, x) for w in want]
            for p, w in zip(pieces, want):
                assert p.device.type == "eagerc" and p.stride() == w.stride()
                assert p.storage_offset() == w.storage_offset() and torch.equal(p.cpu(), w)
            pieces[-1].fill_(7.0)  # a write to a piece is a write to self
            assert bool((d.cpu() == 7.0).any())
    if compile_mode == "background":
        assert eagerc.stats()["interim"] > 0, eagerc.stats()


# --------------------------------------------------------------------------- level 3: TorchCTS's own expectations

def test_fused_gru_cell_workspace_is_atens_layout():
    """ATen's fused GRU cell (CUDA's, XPU's) returns a (B, 5H) workspace [r | z | n | hx | hn]
    (TorchCTS expects (B, 6H)); the out= form resizes its out1 to it, as ATen's out wrapper."""
    g = torch.Generator().manual_seed(4013)
    ig, hg = torch.randn(2, 12, generator=g), torch.randn(2, 12, generator=g)
    hx, ib, hb = torch.randn(2, 4, generator=g), torch.randn(12, generator=g), torch.randn(12, generator=g)
    i_r, i_z, i_n = (ig + ib).chunk(3, 1)
    h_r, h_z, h_n = (hg + hb).chunk(3, 1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    expected_ws = torch.cat([r, z, n, hx, h_n], 1)
    d = [t.to("eagerc") for t in (ig, hg, hx, ib, hb)]
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(*d)
    out0, out1 = torch.empty_like(d[2]), torch.empty(2, 24, device="eagerc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resize warning of a non-empty out
        hy_o, ws_o = torch.ops.aten._thnn_fused_gru_cell.out(*d, out0=out0, out1=out1)
    assert hy_o is out0 and ws_o is out1
    for h, w in ((hy, ws), (hy_o, ws_o)):
        assert w.shape == (2, 20)
        assert_close(w.cpu(), expected_ws)
        assert_close(h.cpu(), n + z * (hx - n))


@pytest.mark.parametrize("call", [lambda t: t.pin_memory(),
                                  lambda t: torch.ops.aten.pin_memory(t, None),
                                  lambda t: torch.ops.aten._pin_memory(t, None),
                                  lambda t: torch.ops.aten._pin_memory.out(t, None, out=torch.empty_like(t))])
def test_pinning_a_device_tensor_raises_atens_error(call):
    """ATen pins only dense CPU tensors: any other device's tensor raises its error (meta's
    here; TorchCTS expects a no-op), and is_pinned is False."""
    errors = []
    for device in ("meta", "eagerc"):
        t = torch.ones(4, device=device)
        assert not t.is_pinned()
        with pytest.raises(RuntimeError) as info:
            call(t)
        errors.append(str(info.value).replace("MetaFloatType", "eagercFloatType"))
    assert errors[1] == errors[0] == "cannot pin 'eagercFloatType' only dense CPU tensors can be pinned"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 2), (2, 3, 7)])
def test_batch_norm_stats_is_cudas_math(dtype, shape):
    """batch_norm_stats (CUDA's kernel only) is compiled from CUDA's math: per channel the
    mean and invstd of the biased variance, in the accumulate type; on CPU eager these are
    training-mode native_batch_norm's save_mean and save_invstd."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(4012)).to(dtype)
    eps = 1e-5
    _, mean, invstd = torch.native_batch_norm(x.float() if dtype == torch.float16 else x,
                                              None, None, None, None, True, 0.1, eps)
    got_mean, got_invstd = torch.ops.aten.batch_norm_stats(x.to("eagerc"), eps)
    out0, out1 = torch.empty(0, device="eagerc"), torch.empty(0, device="eagerc")
    if dtype == torch.float64:
        out0, out1 = out0.double(), out1.double()
    o_mean, o_invstd = torch.ops.aten.batch_norm_stats.out(x.to("eagerc"), eps, out0=out0, out1=out1)
    assert o_mean is out0 and o_invstd is out1
    assert got_mean.dtype == (torch.float32 if dtype == torch.float16 else dtype)
    for m, s in ((got_mean, got_invstd), (o_mean, o_invstd)):
        assert_close(m.cpu(), mean.to(m.dtype))
        assert_close(s.cpu(), invstd.to(s.dtype))


# --------------------------------------------------------------------------- level 3: functional batch norms' half running statistics

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,training", [("_native_batch_norm_legit_functional", True),
                                           ("_native_batch_norm_legit_functional", False),
                                           ("_batch_norm_with_update_functional", None)])
def test_functional_batch_norm_keeps_half_running_statistics(name, training, dtype, mode):
    """torch 2.13's decomposition of the functional batch norms returns updated running
    statistics in float32 where eager keeps their half type (TorchCTS level 3's warm pass):
    these calls run eager's kernel; float32 statistics still compile."""
    op = getattr(torch.ops.aten, name).default
    extra = (0.1, 1e-5) if training is None else (training, 0.1, 1e-5)

    def compare(tensors):
        """op on `tensors` (input, weight, bias, running mean, running var) in `mode`
        against eager: the same dtypes and shapes, and close values."""
        want = op(*tensors, *extra)
        eagerc.reset_stats()
        if mode == "device":
            got = [t.cpu() for t in op(*(t.to("eagerc") for t in tensors), *extra)]
        else:
            with eagerc.enabled("cpu", ops=[f"aten::{name}"]):
                got = op(*tensors, *extra)
        for g, e in zip(got, want):
            assert g.dtype == e.dtype and g.shape == e.shape
            if e.numel():
                torch.testing.assert_close(g, e, equal_nan=True)

    torch.manual_seed(0)
    halves = (torch.randn(4, 3, 5, dtype=dtype), torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype),
              torch.randn(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5)
    compare(halves)
    assert_refused(mode, name, "half running statistics")
    # float32 running statistics: compiled (their dtype is the decomposition's).
    compare([t.float() for t in halves])
    assert_compiled(mode, name)
