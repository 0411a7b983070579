"""The accelerator decompositions of normal and multinomial with tensor arguments
(eagerc/compile/accelerator/random_ops.py) against native eager: shapes, dtypes and the
distribution of many draws (a different stream than ATen's, the same distribution), on CPU
tensors (fast) and compiled on the eagerc device with aliases off, where bad input raises
eager's error (slow)."""
from __future__ import annotations

import textwrap

import pytest
import torch
from vendor_device import SERVED_BY_KERNELS, run_without_aliases

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS

aten = torch.ops.aten


def test_normal_shapes_dtypes_and_moments():
    mean = torch.tensor([[-3.0], [0.0], [5.0]])
    std = torch.tensor([0.5, 1.0, 2.0, 0.0])
    calls = [(aten.normal.Tensor_Tensor, (mean, std)), (aten.normal.Tensor_Tensor, (mean, std.double())),
             (aten.normal.Tensor_float, (mean.expand(3, 4), 1.5)), (aten.normal.float_Tensor, (2.0, std))]
    for op, args in calls:
        expected = op(*args)
        draws = torch.stack([ACCELERATOR_DECOMPOSITIONS[op](*args) for _ in range(4000)])
        assert (draws.shape[1:], draws.dtype) == (expected.shape, expected.dtype), op
        m = args[0] if isinstance(args[0], torch.Tensor) else torch.tensor(args[0])
        s = args[1] if isinstance(args[1], torch.Tensor) else torch.tensor(args[1])
        m, s = torch.broadcast_tensors(m.to(draws.dtype), s.to(draws.dtype))
        m, s = m.expand(expected.shape), s.expand(expected.shape)
        # Means within 5 standard errors, standard deviations within 10%; a zero std is
        # exactly the mean.
        assert ((draws.mean(0) - m).abs() <= 5 * s / 4000 ** 0.5 + 1e-6).all(), op
        assert ((draws.std(0) - s).abs() <= 0.1 * s + 1e-6).all(), op
    # Two calls draw different numbers.
    op = aten.normal.Tensor_Tensor
    assert not torch.equal(ACCELERATOR_DECOMPOSITIONS[op](mean, std), ACCELERATOR_DECOMPOSITIONS[op](mean, std))


def test_normal_asserts_what_eager_refuses():
    with pytest.raises(RuntimeError, match="std >= 0"):
        ACCELERATOR_DECOMPOSITIONS[aten.normal.Tensor_Tensor](torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(RuntimeError, match="std >= 0"):
        ACCELERATOR_DECOMPOSITIONS[aten.normal.float_Tensor](0.0, torch.tensor([-0.5]))


def _frequencies(draws, categories):
    return torch.stack([torch.bincount(d, minlength=categories) for d in draws.unbind(-1)]).float() / draws.shape[0]


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_draws_atens_distribution(replacement):
    """Per row and sample position, the frequency of each category in 4000 draws is within
    0.03 of ATen's own 4000 draws' (both ~0.007 standard error at most), zero weights
    never drawn while others remain."""
    op = aten.multinomial.default
    p = torch.tensor([[0.1, 0.2, 0.7, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 3.0, 0.0, 1.0]])
    for samples in (1, 2):
        ours = torch.stack([ACCELERATOR_DECOMPOSITIONS[op](p, samples, replacement) for _ in range(4000)])
        eager = torch.stack([op(p, samples, replacement) for _ in range(4000)])
        assert ours.dtype == eager.dtype == torch.int64 and ours.shape == eager.shape
        for row in range(p.shape[0]):
            got, want = _frequencies(ours[:, row], 4), _frequencies(eager[:, row], 4)
            assert (got - want).abs().max() <= 0.03, (row, samples, got, want)
        assert not (ours[:, 0] == 3).any() and not (ours[:, 2, 0] % 2 == 0).any()
    one_row = ACCELERATOR_DECOMPOSITIONS[op](p[1], 3, replacement)
    assert one_row.shape == (3,)
    if not replacement:
        assert one_row.unique().numel() == 3


def test_multinomial_asserts_what_eager_refuses():
    op = ACCELERATOR_DECOMPOSITIONS[aten.multinomial.default]
    for bad in ([[1.0, -1.0], [1.0, 1.0]], [[1.0, float("nan")], [1.0, 1.0]], [[1.0, float("inf")], [1.0, 1.0]],
                [[0.0, 0.0], [1.0, 1.0]]):
        for replacement in (True, False):
            with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
                op(torch.tensor(bad), 2, replacement)


_ON_DEVICE = SERVED_BY_KERNELS + textwrap.dedent("""
    import warnings, torch, eagerc
    torch.manual_seed(0)  # fixed inputs: each process draws other ones otherwise
    warnings.simplefilter("ignore")
    d = lambda t: t.to("eagerc")
    p = torch.tensor([[0.1, 0.2, 0.7, 0.0], [1.0, 1.0, 1.0, 1.0]])
    for replacement in (True, False):
        draws = torch.stack([torch.multinomial(d(p), 2, replacement) for _ in range(500)]).cpu()
        assert draws.dtype == torch.int64 and draws.shape == (500, 2, 2)
        assert not (draws[:, 0] == 3).any()
        assert abs((draws[:, 0, 0] == 2).float().mean().item() - 0.7) < 0.08
        for bad, message in (([[1.0, -1.0], [1.0, 1.0]], "probability" if not replacement else "< 0"),
                             ([[0.0, 0.0], [1.0, 1.0]], "sum of probabilities")):
            torch.multinomial(d(torch.ones(2, 2)), 2, replacement)  # compiled: the kernel's check raises
            try:
                torch.multinomial(d(torch.tensor(bad)), 2, replacement)
            except RuntimeError as e:
                assert message in str(e), e
            else:
                raise AssertionError(f"no error for {bad}")
    mean, std = torch.randn(3, 1), torch.rand(4) + 0.5
    draws = torch.stack([torch.normal(d(mean), d(std)) for _ in range(500)]).cpu()
    assert draws.shape == (500, 3, 4) and (draws.mean(0) - mean).abs().max() < 0.5
    assert torch.normal(d(mean), 2.0).shape == (3, 1) and torch.normal(2.0, d(std)).shape == (4,)
    for call in (lambda: torch.normal(d(mean), d(-std)), lambda: torch.normal(d(mean), -1.0)):
        try:
            call()
        except RuntimeError as e:
            assert "std >= 0" in str(e), e
        else:
            raise AssertionError("no error for a negative std")
    served_by_kernels(("multinomial", "normal.Tensor_Tensor", "normal.Tensor_float", "normal.float_Tensor"))
    print("OK")
""")


@pytest.mark.slow
def test_compiled_on_a_device_without_aliases():
    """Compiled on the eagerc device with aliases and the host round trip off; a kernel
    whose check fails has eager's kernel raise eager's error (the holder's re-run)."""
    run_without_aliases(_ON_DEVICE)
