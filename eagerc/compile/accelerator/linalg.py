"""Accelerator decompositions of linear algebra, over the solvers Inductor's C shims list.

A target without native kernels (decompositions.py) would run ATen's linalg
ops with no lowering on the host. Those that ATen itself builds from LAPACK's QR and
triangular solves are traced here into the ATen ops each code generator's vendor library
offers through Inductor's C shim (`c_shim_cpu.h`, `c_shim_cuda.h`: `geqrf`, `ormqr`,
`triangular_solve`), which the artifact calls as externs, plus generated code (triu, the
identity):

- linalg_solve_triangular: `triangular_solve` (a right-hand solve X A = B as the
  transposed left one, A^T X^T = B^T).
- linalg_householder_product: Q's first n columns, `ormqr` applied to the m x n identity
  (ATen's orgqr forms the same product of reflectors in place).
- linalg_qr: `geqrf`, R its upper triangle, Q as above (m x m for mode="complete", none
  for mode="r").
- linalg_lu_solve: the rows of B permuted as the pivots say (`lu_unpack`'s permutation,
  read as indices), then two `triangular_solve`s with LU's unit lower and upper triangles.

Errors: eagerc runs eager's kernel on each new signature before compiling it, so a call
eager refuses (shapes, dtypes) raises eager's error; these ops have no value-dependent
errors (a singular triangle gives infinities, as in ATen).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    # ATen's result is column-major (LAPACK's layout), whatever the inputs' and the side.
    if not left:
        return column_major(aten.triangular_solve(B.mT, A, upper, True, unitriangular)[0].mT)
    return column_major(aten.triangular_solve(B, A, upper, False, unitriangular)[0])


def column_major(t):
    # ATen's factorizations return LAPACK's layout: each matrix column-major.
    return t.mT.contiguous().mT


def _identity(like, rows, cols):
    eye = torch.eye(rows, cols, dtype=like.dtype, device=like.device)
    return eye.expand(*like.shape[:-2], rows, cols).contiguous()


def householder_product(A, tau):
    # ormqr takes exactly as many reflectors as columns of its input (torch.ormqr: tau's
    # length must be min(other.shape[-2], input.shape[-1])): the first k of A's.
    m, n = A.shape[-2:]
    return aten.ormqr(A[..., :, :tau.shape[-1]], tau, _identity(A, m, n), True, False)


def qr(A, mode="reduced"):
    m, n = A.shape[-2:]
    k = min(m, n)
    a, tau = aten.geqrf(A)
    if mode == "complete":
        Q = aten.ormqr(a[..., :, :k], tau, _identity(A, m, m), True, False)
        return column_major(Q), column_major(a.triu())
    R = column_major(a[..., :k, :].triu())
    if mode == "r":
        return A.new_empty((0,)), R
    return column_major(aten.ormqr(a[..., :, :k], tau, _identity(A, m, k), True, False)), R


def _rows(x, index, batch):
    """x's rows (dim -2) taken at `index` (its batch broadcast with `batch`)."""
    n, k = x.shape[-2:]
    x = x.expand(*batch, n, k)
    # A permutation's index is always in range; the clamp is for Inductor's compile-time
    # tuning on a GPU, which runs this gather on random values standing in for the
    # permutation (not one) and whose out-of-range index fired a device-side assert that
    # left the process's CUDA context unusable.
    index = index.clamp(0, n - 1)
    return torch.gather(x, -2, index.expand(*batch, n)[..., None].expand(*batch, n, k))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    if not left:
        # X A = B is the left solve A^T X^T = B^T (real matrices): the adjoint flag flipped.
        # ATen's result is then the transpose of the left solve's column-major one.
        return lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT.contiguous()
    # A = P L U, L unit lower and U upper both read from LU (triangular_solve reads only its
    # triangle). The permutation is applied as a gather, not a product with P, which would
    # spread an infinity of B into NaNs.
    P = aten.lu_unpack(LU, pivots, False, True)[0].to(torch.int64)
    at = torch.arange(P.shape[-1], device=P.device)
    batch = torch.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    if not adjoint:  # L U X = P^T B, and (P^T B)[j] = B[i] where P[i, j] = 1
        Y = _rows(B, (P * at[:, None]).sum(-2), batch)
        Y = aten.triangular_solve(Y, LU, False, False, True)[0]
        return column_major(aten.triangular_solve(Y, LU, True, False, False)[0])
    # A^T X = B: U^T L^T Z = B with Z = P^T X, so X[i] = Z[j] where P[i, j] = 1.
    Z = aten.triangular_solve(B, LU, True, True, False)[0]
    Z = aten.triangular_solve(Z, LU, False, True, True)[0]
    return column_major(_rows(Z, (P * at[None, :]).sum(-1), batch))


def _geqrf_meta(A):
    # What ATen's geqrf returns: the factors in LAPACK's layout (each matrix column-major,
    # batches contiguous) and tau, contiguous. torch has no meta kernel for geqrf, so
    # tracing a call failed; the compiled wrapper checks the extern's result against this.
    torch._check(A.dim() >= 2, lambda: "torch.geqrf: input must have at least 2 dimensions.")
    *batch, m, n = A.shape
    a = A.new_empty((*batch, n, m)).mT
    return a, A.new_empty((*batch, min(m, n)))


_META_LIBRARY = None


def _register_geqrf_meta() -> None:
    global _META_LIBRARY
    if _META_LIBRARY is None and not torch._C._dispatch_has_kernel_for_dispatch_key("aten::geqrf", "Meta"):
        _META_LIBRARY = torch.library.Library("aten", "IMPL")
        _META_LIBRARY.impl("geqrf", _geqrf_meta, "Meta")


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    _register_geqrf_meta()
    return {
        aten.linalg_solve_triangular.default: solve_triangular,
        aten.linalg_solve_triangular.out: out_wrapper()(solve_triangular),
        aten.linalg_householder_product.default: householder_product,
        aten.linalg_householder_product.out: out_wrapper()(householder_product),
        aten.linalg_qr.default: qr,
        aten.linalg_lu_solve.default: lu_solve,
        aten.linalg_lu_solve.out: out_wrapper()(lu_solve),
        aten.linalg_qr.out: out_wrapper("Q", "R")(qr),
    }
