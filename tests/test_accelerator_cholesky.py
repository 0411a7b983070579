"""The accelerator decompositions of the Cholesky factorization
(eagerc/compile/accelerator/cholesky.py) against native eager: OpInfo's calls and matrices
that are not positive-definite (info, and the partial factor ATen returns), on CPU tensors
(fast), and compiled on the eagerc device with aliases off (slow)."""
from __future__ import annotations

import textwrap
import warnings

import pytest
import torch
from vendor_device import SERVED_BY_KERNELS, opinfo_calls, run_without_aliases

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
from eagerc.testing import assert_close

aten = torch.ops.aten
OPS = (aten.linalg_cholesky_ex.default, aten.cholesky.default)
NOT_DEFINITE = [torch.tensor([[4.0, 2, 1, 3], [2, -5, 2, 1], [1, 2, 6, 1], [3, 1, 1, 7]]),
                torch.tensor([[4.0, 2, 1, 3], [2, 5, 2, 1], [1, 2, -6, 1], [3, 1, 1, 7]]),
                torch.tensor([[4.0, 2], [2, float("nan")]]), torch.zeros(3, 3), torch.tensor([[-1.0, 2], [2, 3]])]


def _check(actual, expected, what):
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(actual, expected):
        assert (a.shape, a.dtype) == (e.shape, e.dtype), what
        if e.dtype == torch.int32:
            assert torch.equal(a, e), (what, a, e)
        else:
            assert_close(a, e, equal_nan=True)
        if e.numel():
            assert all(x == y or n <= 1 for x, y, n in zip(a.stride(), e.stride(), e.shape)), what


def test_matches_eager_on_opinfo_calls():
    calls = opinfo_calls(("linalg.cholesky", "linalg.cholesky_ex", "cholesky"), OPS,
                         (torch.float32, torch.float64))
    assert {c[0] for c in calls} == set(OPS) and len(calls) > 20
    for func, args, kwargs in calls:
        _check(ACCELERATOR_DECOMPOSITIONS[func](*args, **kwargs), func(*args, **kwargs), (func, kwargs))


@pytest.mark.parametrize("upper", [False, True])
def test_not_positive_definite_gives_atens_info_and_partial_factor(upper):
    op = aten.linalg_cholesky_ex.default
    for A in NOT_DEFINITE + [torch.stack(NOT_DEFINITE[:2]), torch.randn(2, 5, 5)]:
        _check(ACCELERATOR_DECOMPOSITIONS[op](A, upper=upper), op(A, upper=upper), (A, upper))
    with pytest.raises(NotImplementedError, match="not unrolled"):
        ACCELERATOR_DECOMPOSITIONS[op](torch.eye(17))


_ON_DEVICE = SERVED_BY_KERNELS + textwrap.dedent("""
    import warnings, torch, eagerc
    torch.manual_seed(0)  # fixed inputs: each process draws other ones otherwise
    from eagerc.testing import assert_close
    warnings.simplefilter("ignore")
    d = lambda v: v.to("eagerc")
    A = torch.randn(3, 5, 5)
    A = A @ A.mT + torch.eye(5)
    bad = torch.tensor([[4.0, 2, 1, 3], [2, 5, 2, 1], [1, 2, -6, 1], [3, 1, 1, 7]])
    for x in (A, bad):
        for upper in (False, True):
            expected, actual = torch.linalg.cholesky_ex(x, upper=upper), torch.linalg.cholesky_ex(d(x), upper=upper)
            assert_close(actual.L.cpu(), expected.L)
            assert torch.equal(actual.info.cpu(), expected.info)
    assert_close(torch.cholesky(d(A)).cpu(), torch.cholesky(A))
    torch.linalg.cholesky(d(bad + 10 * torch.eye(4)))  # compiled: the next call raises through its check
    try:
        torch.linalg.cholesky(d(bad))
    except torch.linalg.LinAlgError as e:
        assert "not positive-definite" in str(e), e
    else:
        raise AssertionError("no error for a matrix that is not positive-definite")
    served_by_kernels(("linalg_cholesky_ex", "cholesky"))
    print("OK")
""")


@pytest.mark.slow
def test_compiled_on_a_device_without_aliases():
    run_without_aliases(_ON_DEVICE)


def test_value_checks_are_host_code_only():
    # On GPU memory a failed check is a device-side assert (the process's CUDA context is
    # then unusable), and Inductor runs the kernels on random values while compiling them:
    # a decomposition that checks values is refused there and the op takes the next rung.
    from eagerc.compile.accelerator import cholesky, random_ops, value_checks

    value_checks.assert_values(torch.tensor(True), "fine")
    with pytest.raises(RuntimeError, match="not positive"):
        value_checks.assert_values(torch.tensor(False), "not positive")
    off_host = torch.empty(3, 3, device="meta")
    with pytest.raises(NotImplementedError, match="device-side assert"):
        cholesky.cholesky(off_host)
    with pytest.raises(NotImplementedError, match="device-side assert"):
        random_ops.multinomial(torch.empty(4, device="meta"), 2)
    # Without a check the factorization is traced on any memory.
    cholesky.cholesky_ex(off_host, check_errors=False)
