"""Accelerator decompositions of the LU factorization and what ATen builds on it.

Neither C shim lists an LU factorization (`getrf`), so a target without native kernels
would run `linalg_lu_factor_ex` and the ops ATen derives from it on the host. Here the
factorization is LAPACK's unblocked algorithm (getf2) with partial pivoting, one step per
column, as generated code: the pivot is the first row of largest magnitude at or below
the diagonal (LAPACK's i*amax), the two rows swap, the entries below the pivot are divided
by it (left as they are when it is zero, which sets `info` to the first such column, 1-based,
as LAPACK does), and the trailing block takes the rank-1 update. The steps are unrolled,
one graph per size, so only matrices up to `_MAX_STEPS` columns (or rows) are decomposed; a
larger one is left to a later rung.

LAPACK's blocked getrf sums the same products in another order, so the factors agree with
ATen's to rounding and the pivots are ATen's except where two candidates tie to within that
rounding (as ATen's CPU and CUDA kernels differ there too).

- linalg_lu_factor_ex: (LU column-major, pivots int32 1-based, info int32); check_errors
  is an `_assert_async` (the holder has eager's kernel raise eager's error; a GPU target
  refuses it, value_checks.py).
- linalg_lu: `lu_unpack` (a listed extern) of the factorization.
- _linalg_det / _linalg_slogdet: the diagonal's product (log-magnitudes' sum and signs)
  times the permutation's sign, with LU and pivots (of A^T for a row-major A, as ATen).
- linalg_inv_ex / _linalg_solve_ex: the factorization and linalg_lu_solve's decomposition
  (linalg.py), with ATen's vector right-hand side for solve.
"""
from __future__ import annotations

import torch

from eagerc.compile.accelerator.linalg import column_major
from eagerc.compile.accelerator.value_checks import assert_values

aten = torch.ops.aten

# Columns (or rows) beyond which the unrolled factorization is not traced.
_MAX_STEPS = 16


def _factor(A):
    """(LU, pivots, info) of A (..., m, n) by getf2, LU row-major here."""
    m, n = A.shape[-2:]
    steps = min(m, n)
    if steps > _MAX_STEPS:
        raise NotImplementedError(f"an LU factorization of {steps} steps is not unrolled")
    batch = A.shape[:-2]
    rows = torch.arange(m, device=A.device)
    cols = torch.arange(n, device=A.device)
    a = A.clone()
    pivots = []
    info = torch.zeros(batch, dtype=torch.int32, device=A.device)
    for j in range(steps):
        column = a[..., :, j].abs()
        candidates = torch.where(rows >= j, column, torch.full_like(column, -1.0))
        p = candidates.argmax(-1)                                            # (batch,)
        pivots.append(p)
        # Swap rows j and p.
        order = torch.where(rows == j, p[..., None], torch.where(rows == p[..., None], j, rows))
        a = torch.gather(a, -2, order[..., :, None].expand(*batch, m, n))
        pivot = a[..., j, j]
        zero = pivot == 0
        info = torch.where((info == 0) & zero, torch.full_like(info, j + 1), info)
        below = (rows > j)[:, None] & (cols == j)[None, :]
        scaled = torch.where(zero[..., None, None], a, a / pivot[..., None, None])
        a = torch.where(below, scaled, a)
        # The trailing block: a[i, c] -= l[i] * a[j, c] for i > j, c > j.
        l = a[..., :, j:j + 1]
        u = a[..., j:j + 1, :]
        trailing = (rows > j)[:, None] & (cols > j)[None, :]
        a = torch.where(trailing, a - l * u, a)
    if pivots:
        piv = torch.stack(pivots, -1).to(torch.int32) + 1
    else:
        piv = torch.zeros((*batch, 0), dtype=torch.int32, device=A.device)
    return a, piv, info


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    if not pivot:
        raise NotImplementedError("LU without pivoting")  # ATen's CPU kernel refuses it
    LU, pivots, info = _factor(A)
    if check_errors:
        assert_values((info == 0).all(), "linalg.lu_factor: the factorization could not be completed")
    return column_major(LU), pivots, info


def lu(A, *, pivot=True):
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return aten.lu_unpack(LU, pivots, True, True)


def _permutation_sign(pivots):
    at = torch.arange(1, pivots.shape[-1] + 1, device=pivots.device, dtype=pivots.dtype)
    swaps = (pivots != at).sum(-1)
    return 1 - 2 * (swaps % 2)


def _det_factors(A):
    # ATen factors a row-major A as its transpose (LAPACK's column-major view of the same
    # memory, no copy): the determinant is the same, and the LU and pivots it returns for
    # the backward are those of A^T.
    return lu_factor_ex(A.mT if A.is_contiguous() else A)


def det(A):
    LU, pivots, _ = _det_factors(A)
    diagonal = LU.diagonal(0, -2, -1)
    return diagonal.prod(-1) * _permutation_sign(pivots).to(A.dtype), LU, pivots


def slogdet(A):
    LU, pivots, _ = _det_factors(A)
    diagonal = LU.diagonal(0, -2, -1)
    sign = diagonal.sign().prod(-1) * _permutation_sign(pivots).to(A.dtype)
    return sign, diagonal.abs().log().sum(-1), LU, pivots


def inv_ex(A, *, check_errors=False):
    from eagerc.compile.accelerator.linalg import lu_solve

    LU, pivots, info = lu_factor_ex(A, check_errors=check_errors)
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], n, n)
    return lu_solve(LU, pivots, eye), info


def solve_ex(A, B, *, left=True, check_errors=False):
    from eagerc.compile.accelerator.linalg import lu_solve

    LU, pivots, info = lu_factor_ex(A, check_errors=check_errors)
    # ATen's vector right-hand side: B of A's shape less its last dim (or 1-d).
    vector = B.dim() == 1 or (left and B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    if vector:
        # ATen lays the result out as B's shape with its last two dims column-major.
        result = lu_solve(LU, pivots, B.unsqueeze(-1), left=left).squeeze(-1)
        return (column_major(result) if result.dim() >= 2 else result), LU, pivots, info
    return lu_solve(LU, pivots, B, left=left), LU, pivots, info


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    return {
        aten.linalg_lu_factor_ex.default: lu_factor_ex,
        aten.linalg_lu_factor_ex.out: out_wrapper("LU", "pivots", "info")(lu_factor_ex),
        aten.linalg_lu.default: lu,
        aten.linalg_lu.out: out_wrapper("P", "L", "U")(lu),
        aten._linalg_det.default: det,
        aten._linalg_det.result: out_wrapper("result", "LU", "pivots")(det),
        aten._linalg_slogdet.default: slogdet,
        aten._linalg_slogdet.sign: out_wrapper("sign", "logabsdet", "LU", "pivots")(slogdet),
        aten.linalg_inv_ex.default: inv_ex,
        aten.linalg_inv_ex.inverse: out_wrapper("inverse", "info")(inv_ex),
        aten._linalg_solve_ex.default: solve_ex,
        aten._linalg_solve_ex.result: out_wrapper("result", "LU", "pivots", "info")(solve_ex),
    }
