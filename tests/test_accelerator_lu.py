"""The accelerator decompositions of the LU factorization and the ops ATen builds on it
(eagerc/compile/accelerator/lu.py) against native eager: every call OpInfo's linalg samples
make of them, on CPU tensors (fast: values, pivots and info exactly, shapes, dtypes and
ATen's strides), and compiled on the eagerc device with aliases off (slow)."""
from __future__ import annotations

import textwrap
import warnings

import pytest
import torch
from vendor_device import SERVED_BY_KERNELS, opinfo_calls, run_without_aliases

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
from eagerc.testing import assert_close

aten = torch.ops.aten
OPS = (aten.linalg_lu_factor_ex.default, aten.linalg_lu.default, aten._linalg_det.default,
       aten._linalg_slogdet.default, aten.linalg_inv_ex.default, aten._linalg_solve_ex.default)
ENTRIES = ("linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu", "lu", "linalg.det", "det", "logdet",
           "linalg.slogdet", "linalg.inv", "linalg.inv_ex", "inverse", "linalg.solve", "linalg.solve_ex",
           "linalg.matrix_power")


def _check(actual, expected, what):
    for a, e in zip(actual, expected):
        assert (a.shape, a.dtype) == (e.shape, e.dtype), (what, a.shape, e.shape)
        if e.dtype in (torch.int32, torch.int64):
            assert torch.equal(a, e), (what, a, e)  # pivots, info
        else:
            assert_close(a, e, equal_nan=True)
        if e.numel():
            assert all(x == y or n <= 1 for x, y, n in zip(a.stride(), e.stride(), e.shape)), \
                (what, a.stride(), e.stride())


def test_matches_eager_on_opinfo_calls():
    calls = opinfo_calls(ENTRIES, OPS, (torch.float32, torch.float64))
    assert {c[0] for c in calls} == set(OPS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # triangular_solve's deprecation notice
        for func, args, kwargs in calls:
            _check(ACCELERATOR_DECOMPOSITIONS[func](*args, **kwargs), func(*args, **kwargs), (func, kwargs))
    assert len(calls) > 100


def test_singular_and_rectangular_factors_and_info():
    """A zero pivot is left unscaled and sets info to its column (1-based), as LAPACK does;
    rectangular inputs factor min(m, n) columns."""
    op = aten.linalg_lu_factor_ex.default
    for A in (torch.zeros(3, 3), torch.tensor([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]]),
              torch.tensor([[0.0, 1], [0, 2]]), torch.randn(3, 6), torch.randn(6, 3), torch.randn(2, 0, 4)):
        _check(ACCELERATOR_DECOMPOSITIONS[op](A), op(A), A.shape)


def test_det_factors_the_transpose_of_a_row_major_input():
    A = torch.randn(4, 4, dtype=torch.float64)
    for op in (aten._linalg_det.default, aten._linalg_slogdet.default):
        for x in (A, A.mT.contiguous().mT, torch.randn(8, 4, dtype=torch.float64)[::2]):
            _check(ACCELERATOR_DECOMPOSITIONS[op](x), op(x), (op, x.stride()))


def test_large_matrices_are_left_to_a_later_rung():
    with pytest.raises(NotImplementedError, match="not unrolled"):
        ACCELERATOR_DECOMPOSITIONS[aten.linalg_lu_factor_ex.default](torch.randn(17, 17))


_ON_DEVICE = SERVED_BY_KERNELS + textwrap.dedent("""
    import warnings, torch, eagerc
    torch.manual_seed(0)  # fixed inputs: each process draws other ones otherwise
    from eagerc.testing import assert_close
    warnings.simplefilter("ignore")
    aten = torch.ops.aten
    d = lambda v: v.to("eagerc") if isinstance(v, torch.Tensor) else v
    A, B = torch.randn(3, 5, 5), torch.randn(3, 5, 2)
    singular = torch.tensor([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])
    ties = torch.tensor([[1.0, 2.0, 0.0], [-1.0, 2.0, 1.0], [1.0, -2.0, 3.0]])  # the first of equal magnitudes
    calls = [(aten.linalg_lu_factor_ex.default, (A,), {}), (aten.linalg_lu_factor_ex.default, (singular,), {}),
             (aten.linalg_lu_factor_ex.default, (torch.zeros(2, 3, 3),), {}),
             (aten.linalg_lu_factor_ex.default, (ties,), {}),
             (aten.linalg_lu.default, (torch.randn(4, 6),), {}), (aten._linalg_det.default, (A,), {}),
             (aten._linalg_det.default, (A.mT,), {}), (aten._linalg_slogdet.default, (A,), {}),
             (aten.linalg_inv_ex.default, (A,), {}), (aten._linalg_solve_ex.default, (A, B), {}),
             (aten._linalg_solve_ex.default, (A, B.mT), {"left": False}),
             (aten._linalg_solve_ex.default, (A, B[..., 0]), {})]
    for func, args, kwargs in calls:
        expected, actual = func(*args, **kwargs), func(*map(d, args), **kwargs)
        for a, e in zip(actual, expected):
            assert a.device.type == "eagerc" and a.shape == e.shape and a.dtype == e.dtype, (func, a, e)
            assert_close(a.cpu(), e)
            if e.dtype == torch.int32:
                assert torch.equal(a.cpu(), e), (func, a, e)  # pivots and info exactly
    torch.linalg.inv(d(A))  # compiled: the singular call below raises through the kernel's check
    for call, message in ((lambda: torch.linalg.lu_factor(d(singular)), "U[3,3] is zero"),
                          (lambda: torch.linalg.inv(d(singular[None].expand(3, 3, 3).contiguous())),
                           "The diagonal element 3 is zero")):
        try:
            call()
        except RuntimeError as e:
            assert message in str(e), e
        else:
            raise AssertionError("no error for a singular matrix")
    served_by_kernels(("linalg_lu_factor_ex", "linalg_lu", "_linalg_det", "_linalg_slogdet", "linalg_inv_ex",
               "_linalg_solve_ex"))
    print("OK")
""")


@pytest.mark.slow
def test_compiled_on_a_device_without_aliases():
    run_without_aliases(_ON_DEVICE)
