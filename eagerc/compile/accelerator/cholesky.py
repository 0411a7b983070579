"""Accelerator decompositions of the Cholesky factorization (linalg_cholesky_ex, cholesky).

Neither C shim lists a Cholesky factorization (`potrf`), so a target without native
kernels would run these on the host. Here it is LAPACK's unblocked algorithm (potf2, lower),
one generated step per column, unrolled up to `_MAX_STEPS` columns (a larger matrix goes
to a later rung): column j's diagonal is a[j, j] less the squares of row j's factored
entries; where that is not positive (or NaN) it is stored as it is, `info` is j + 1 and
the factorization stops there, the later columns keeping the input's values, as LAPACK
leaves them (and ATen returns them, the other triangle zeroed). Otherwise the diagonal is
its square root and the entries below it are updated and divided by it.

Only the lower triangle of the input is read; upper=True factors the transpose of the
upper triangle and returns the transpose, as LAPACK's upper variant computes the same
numbers. Results are column-major, as ATen's. `cholesky` and `check_errors` raise through
an `_assert_async` (the holder then has eager's kernel raise eager's error); a GPU
target refuses those two (value_checks.py: they take the next rung).
"""
from __future__ import annotations

import torch

from eagerc.compile.accelerator.linalg import column_major
from eagerc.compile.accelerator.value_checks import assert_values

aten = torch.ops.aten

_MAX_STEPS = 16


def _potf2_lower(A):
    n = A.shape[-1]
    if n > _MAX_STEPS:
        raise NotImplementedError(f"a Cholesky factorization of {n} columns is not unrolled")
    batch = A.shape[:-2]
    rows = torch.arange(n, device=A.device)
    a = A.tril()
    info = torch.zeros(batch, dtype=torch.int32, device=A.device)
    for j in range(n):
        # The factored columns (< j); a mask, not a product, so a NaN beyond them stays out.
        factored = torch.where(rows < j, a, torch.zeros((), dtype=a.dtype, device=a.device))
        row_j = factored[..., j, :]
        d = a[..., j, j] - (row_j * row_j).sum(-1)
        running = info == 0
        fails = running & ~(d > 0)
        info = torch.where(fails, torch.full_like(info, j + 1), info)
        ok = running & ~fails
        root = torch.sqrt(torch.where(ok, d, torch.ones_like(d)))
        below = (a[..., :, j] - (factored * row_j[..., None, :]).sum(-1)) / root[..., None]
        column = torch.where(rows > j, below, a[..., :, j])
        column = torch.where(rows == j, torch.where(ok, root, d)[..., None], column)
        column = torch.where((ok | fails)[..., None], column, a[..., :, j])
        column = torch.where(fails[..., None] & (rows > j), a[..., :, j], column)
        a = torch.where(rows == j, column[..., :, None], a)
    return a.tril(), info


def cholesky_ex(A, *, upper=False, check_errors=False):
    L, info = _potf2_lower(A.mT if upper else A)
    if check_errors:
        assert_values((info == 0).all(), "linalg.cholesky: the input is not positive-definite")
    return column_major(L.mT if upper else L), info


def cholesky(A, upper=False):
    factor, info = cholesky_ex(A, upper=upper)
    assert_values((info == 0).all(), "cholesky: the input is not positive-definite")
    return factor


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    return {
        aten.linalg_cholesky_ex.default: cholesky_ex,
        aten.linalg_cholesky_ex.L: out_wrapper("L", "info")(cholesky_ex),
        aten.cholesky.default: cholesky,
        aten.cholesky.out: out_wrapper()(cholesky),
    }
