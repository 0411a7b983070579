"""Eager-mode semantics of compute ops on the eagerc device (issue 3).

Every compute op here runs as a compiled kernel on "eagerc"; its result is compared with
the same call in CPU eager mode through eagerc.testing.assert_close. What is checked is
what a user relies on in eager mode: views alias, in-place ops and out= return their
argument, dtypes convert and promote, non-contiguous and empty inputs work, factories and
random ops run on the device, and an op that cannot be compiled runs ATen's CPU kernel on
zero-copy aliases (or, with EAGERC_ALIAS_FALLBACK=0 and the host round trip opted out,
fails loudly; the round trip itself: tests/test_host_round_trip.py).
"""
import pytest
import torch

import eagerc  # noqa: F401  (registers the eagerc device)
from eagerc.testing import assert_close

DEV = "eagerc"


def on_dev(t):
    return t.to(DEV)


def check(actual, expected, **kwargs):
    """`actual` lives on eagerc, `expected` is CPU eager's result: same dtype, shape, values."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            check(a, e, **kwargs)
        return
    assert actual.device.type == DEV, actual.device
    assert_close(actual.cpu(), expected, **kwargs)


def same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# ---------------------------------------------------------------- views and aliasing

def test_view_shares_storage_and_sees_compute_writes():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = on_dev(base)
    v = x[1:]
    assert same_storage(v, x) and v.storage_offset() == 4
    x.add_(1)  # a compiled in-place kernel on the base is seen through the view
    check(v, base[1:] + 1)


def test_in_place_write_through_a_view_reaches_the_base():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = on_dev(base)
    expected = base.clone()

    r = x[1:].mul_(2)
    expected[1:].mul_(2)
    assert same_storage(r, x)
    check(x, expected)

    x.t().add_(1)  # a transposed (non-contiguous) in-place target
    expected.t().add_(1)
    check(x, expected)

    x[:, 1::2].zero_()  # strided column view
    expected[:, 1::2].zero_()
    check(x, expected)


# ---------------------------------------------------------------- in-place and out=

def test_in_place_returns_its_argument():
    a = torch.randn(5, 3)
    x = on_dev(a)
    y = x.add_(1)
    assert y is x
    z = x.mul_(on_dev(torch.full((3,), 2.0)))  # broadcast operand
    assert z is x
    check(x, (a + 1) * 2)


def test_out_returns_its_argument():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    o = torch.empty(4, 5, device=DEV)
    r = torch.add(on_dev(a), on_dev(b), out=o)
    assert r is o
    check(o, a + b)


def test_out_that_must_be_resized():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    o = torch.empty(0, device=DEV)
    r = torch.add(on_dev(a), on_dev(b), out=o)
    assert r is o and o.shape == (4, 5)
    check(o, a + b)
    o2 = torch.empty(2, 2, device=DEV)  # wrong non-empty size: resized (with a warning) as on CPU
    with pytest.warns(UserWarning, match="resize"):
        r2 = torch.mul(on_dev(a), on_dev(b), out=o2)
    assert r2 is o2
    check(o2, a * b)


# ---------------------------------------------------------------- dtypes, copies

def test_dtype_conversions_on_device():
    a = torch.randn(3, 4) * 10
    x = on_dev(a)
    for conv in (lambda t: t.to(torch.float64), lambda t: t.half(), lambda t: t.int(),
                 lambda t: t.to(torch.bfloat16), lambda t: t.bool()):
        r = conv(x)
        check(r, conv(a))
        assert r.dtype == conv(a).dtype


def test_cpu_eagerc_copies():
    a = torch.randn(3, 4)
    x = on_dev(a)
    assert x.device == torch.device("eagerc:0")
    assert torch.equal(x.cpu(), a)
    dst = torch.zeros(3, 4, device=DEV)
    dst.copy_(a)  # cpu -> eagerc
    back = torch.zeros(3, 4)
    back.copy_(dst)  # eagerc -> cpu
    assert torch.equal(back, a)
    y = x.to(DEV)  # same device: no copy
    assert y is x
    z = x.clone()
    assert not same_storage(z, x)
    check(z, a)


# ---------------------------------------------------------------- layouts and sizes

def test_non_contiguous_inputs_to_compute_ops():
    a = torch.randn(6, 8)
    b = torch.randn(8, 6)
    x, y = on_dev(a), on_dev(b)
    check(x.t() + y, a.t() + b)  # transposed
    check(x[::2, 1::3] * 3, a[::2, 1::3] * 3)  # strided slices
    check(torch.relu(x.t()), torch.relu(a.t()))
    check(x.t().sum(dim=0), a.t().sum(dim=0))
    check(torch.mm(x.t(), y.t()), torch.mm(a.t(), b.t()))
    check(x[:, 2:].exp(), a[:, 2:].exp())  # offset view


def test_zero_size_tensors():
    a = torch.randn(0, 4)
    x = on_dev(a)
    check(x + 1, a + 1)
    check(x.sum(dim=0), a.sum(dim=0))
    check(x.sum(), a.sum())
    check(torch.mm(x, on_dev(torch.randn(4, 3))), torch.mm(a, torch.randn(4, 3)))


def test_item():
    a = torch.randn(7)
    x = on_dev(a)
    assert x.sum().item() == pytest.approx(a.sum().item(), rel=1e-5)
    assert on_dev(torch.tensor([3, 4])).max().item() == 4
    assert on_dev(torch.tensor(2.5)).mul(2).item() == 5.0
    assert (x > 0).any().item() == (a > 0).any().item()


def test_type_promotion_and_broadcasting():
    i = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    f = torch.randn(3)
    d = torch.randn(2, 1, dtype=torch.float64)
    xi, xf, xd = on_dev(i), on_dev(f), on_dev(d)
    r = xi + xf  # int32 + float32 -> float32, [2,3] + [3]
    assert r.dtype == torch.float32
    check(r, i + f)
    r = xf * xd  # float32 + float64 -> float64, [3] * [2,1] -> [2,3]
    assert r.dtype == torch.float64 and r.shape == (2, 3)
    check(r, f * d)
    check(xi * 2.5, i * 2.5)  # int tensor * python float -> float32
    check(xi // 2, i // 2)
    check(xi / 4, i / 4)  # true division promotes
    check(xf + on_dev(torch.tensor(1.5, dtype=torch.float64)), f + torch.tensor(1.5, dtype=torch.float64))


# ---------------------------------------------------------------- factories

@pytest.mark.slow
def test_factory_ops_on_device():
    cases = {
        "zeros": lambda d: torch.zeros(2, 3, device=d),
        "ones": lambda d: torch.ones(4, dtype=torch.int64, device=d),
        "full": lambda d: torch.full((2, 2), 3.5, device=d),
        "arange": lambda d: torch.arange(0, 10, 3, device=d),
        "arange_float": lambda d: torch.arange(0.0, 1.0, 0.25, device=d),
        "linspace": lambda d: torch.linspace(-1, 1, 7, device=d),
        "eye": lambda d: torch.eye(3, 4, device=d),
    }
    for name, make in cases.items():
        r = make(DEV)
        assert r.device.type == DEV, name
        check(r, make("cpu"))
    like = torch.randn(2, 5, dtype=torch.float64)
    x = on_dev(like)
    check(torch.zeros_like(x), torch.zeros_like(like))
    check(torch.ones_like(x), torch.ones_like(like))
    check(torch.full_like(x, 7.0), torch.full_like(like, 7.0))
    e = torch.empty_like(x)
    assert e.device.type == DEV and e.shape == like.shape and e.dtype == like.dtype


# ---------------------------------------------------------------- random ops

RANDOM = {
    "randn": lambda: torch.randn(2000, device=DEV),
    "rand": lambda: torch.rand(2000, device=DEV),
    "randint": lambda: torch.randint(0, 10, (2000,), device=DEV),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(2000, device=DEV), p=0.25, training=True),
}


@pytest.mark.parametrize("seed_fn", [torch.manual_seed, lambda s: torch.eagerc.manual_seed(s)],
                         ids=["torch.manual_seed", "torch.eagerc.manual_seed"])
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_ops_are_reproducible(name, seed_fn):
    seed_fn(1234)
    first = RANDOM[name]()
    second_unseeded = RANDOM[name]()
    seed_fn(1234)
    again = RANDOM[name]()
    assert first.device.type == DEV
    assert torch.equal(first.cpu(), again.cpu())
    assert not torch.equal(first.cpu(), second_unseeded.cpu())


def test_random_ops_statistics():
    torch.manual_seed(0)
    n = torch.randn(20000, device=DEV).cpu()
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    u = torch.rand(20000, device=DEV).cpu()
    assert u.min().item() >= 0 and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.02
    r = torch.randint(0, 10, (20000,), device=DEV).cpu()
    assert r.dtype == torch.int64 and r.min().item() == 0 and r.max().item() == 9
    assert torch.bincount(r, minlength=10).min().item() > 1700
    d = torch.nn.functional.dropout(torch.ones(20000, device=DEV), p=0.25, training=True).cpu()
    kept = d != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.02
    assert torch.allclose(d[kept], torch.full_like(d[kept], 1 / 0.75))


# ---------------------------------------------------------------- the unsupported path

def _complex_input():
    return torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j, 0.25j], dtype=torch.complex64)


def _aliased(op):
    return eagerc.stats()["ops"].get(f"{op}@PrivateUse1", {}).get("aliased", 0)


@pytest.fixture
def strict_device():
    """EAGERC_ALIAS_FALLBACK=0 and EAGERC_CPU_FALLBACK=0: an op eagerc can neither compile
    nor give a vendor extern raises, as on a device whose memory no ATen kernel can address
    with the host round trip opted out (tests/test_host_round_trip.py: the default)."""
    from eagerc import _C, _config

    _C._set_alias_fallback(False)
    _C._set_cpu_fallback(False)
    yield
    _C._set_cpu_fallback(_config.cpu_fallback_enabled())
    _C._set_alias_fallback(True)


@pytest.mark.parametrize("call,op", [
    (lambda c: torch.fft.fft(c), "aten::_fft_c2c"),
    (lambda c: c + c, "aten::add.Tensor"),
])
def test_uncompilable_op_runs_atens_cpu_kernel_on_aliases(call, op):
    """Host memory has a home whose kernels address it: what cannot be compiled runs
    ATen's CPU kernel on zero-copy aliases, counted as aliased, with eager's result."""
    before = _aliased(op)
    check(call(on_dev(_complex_input())), call(_complex_input()))
    assert _aliased(op) == before + 1


@pytest.mark.parametrize("call", [
    lambda x: torch.equal(x, x) and not torch.equal(x, x + 1),          # returns a bool
    lambda x: torch.histogram(x, bins=4),                                # two tensors, bin edges
    lambda x: torch.linalg.inv(x + 4 * torch.eye(3, device=x.device)),  # no Inductor lowering
    lambda x: torch.nonzero(x > 0),                                      # data-dependent shape
    lambda x: torch.complex(x, x + 1),                                   # a complex output
    lambda x: torch.polar(x.abs(), x),
])
def test_ops_no_kernel_can_serve_run_on_aliases(call):
    x = torch.randn(3, 3)
    got, want = call(on_dev(x)), call(x)
    if isinstance(want, bool):
        assert got is True and want is True
    else:
        check(tuple(got) if isinstance(want, tuple) else got,
              tuple(want) if isinstance(want, tuple) else want)


@pytest.mark.parametrize("call,op", [
    (lambda c: torch.sin(c), "aten::sin"),  # not a vendor extern: _fft_c2c and add.Tensor are
    (lambda c: c.exp(), "aten::exp"),
])
def test_uncompilable_op_raises_a_helpful_error_when_strict(strict_device, call, op):
    with pytest.raises(NotImplementedError) as info:
        call(on_dev(_complex_input()))
    message = str(info.value)
    assert op in message and "EAGERC_CPU_FALLBACK" in message
    assert "torch.library.impl" in message  # the other way forward


@pytest.mark.slow
def test_uncompilable_op_raises_for_an_op_inductor_cannot_lower(strict_device):
    x = on_dev(torch.randn(3, 3) + 3 * torch.eye(3))
    with pytest.raises(NotImplementedError, match=r"aten::linalg_inv_ex(.|\n)*EAGERC_CPU_FALLBACK"):
        torch.linalg.inv(x)


def test_a_result_the_device_cannot_hold_raises_instead_of_crashing():
    """_efficientzerotensor's CPU kernel returns a ZeroTensor (no memory): handing it back
    as a device tensor over "the same memory" used to crash the process."""
    with pytest.raises(NotImplementedError, match="ZeroTensor"):
        torch.ops.aten._efficientzerotensor([2, 2], device=DEV)


@pytest.mark.parametrize("factory", [
    lambda: torch.randn(3, device=DEV), lambda: torch.rand(2, 2, device=DEV),
    lambda: torch.randint(0, 5, (3,), device=DEV), lambda: torch.zeros(3, device=DEV),
])
def test_factories_put_results_on_the_current_device_with_its_index(factory):
    t = factory()
    assert t.device == torch.device(DEV, 0) and t.untyped_storage().device == t.device
    torch.add(t, t, out=torch.empty(0, dtype=t.dtype, device=DEV))  # needs one device


def test_an_out_the_cpu_kernel_restrides_past_its_size_is_handed_back():
    """linalg_lstsq's CPU kernel leaves a 3x2 solution with strides [1, 5] over a 5x2
    buffer: the device tensor must get storage for those strides (it raised 'out of
    bounds for storage of size 24')."""
    a, b = torch.randn(5, 3), torch.randn(5, 2)
    got = torch.linalg.lstsq(on_dev(a), on_dev(b)).solution
    want = torch.linalg.lstsq(a, b).solution
    assert got.stride() == want.stride()
    assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
