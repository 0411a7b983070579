"""The accelerator decompositions of linear algebra (eagerc/compile/accelerator/linalg.py)
against native eager: on OpInfo samples and every mode, on CPU tensors (fast: values,
shapes, dtypes and ATen's strides), and compiled on the eagerc device with aliases off
(slow: each compiles, the solvers as externs of the artifact, no host round trip)."""
from __future__ import annotations

import textwrap
import warnings

import pytest
import torch
from vendor_device import SERVED_BY_KERNELS, run_without_aliases

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
from eagerc.testing import assert_close

aten = torch.ops.aten

OPS = {"linalg.solve_triangular": aten.linalg_solve_triangular.default,
       "linalg.householder_product": aten.linalg_householder_product.default,
       "linalg.qr": aten.linalg_qr.default,
       "linalg.lu_solve": aten.linalg_lu_solve.default}


def _same_layout(actual, expected):
    """Strides equal where they matter (a dim of size 1 or an empty tensor has any)."""
    if expected.numel() == 0:
        return True
    return all(a == e or n <= 1 for a, e, n in zip(actual.stride(), expected.stride(), expected.shape))


def _check(actual, expected, what):
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected), what
    for a, e in zip(actual, expected):
        assert (a.shape, a.dtype) == (e.shape, e.dtype), (what, a.shape, e.shape)
        assert _same_layout(a, e), (what, a.stride(), e.stride())
        assert_close(a, e)


@pytest.mark.parametrize("name", sorted(OPS))
def test_matches_eager_on_opinfo_samples(name):
    from torch.testing._internal.common_methods_invocations import op_db

    op = OPS[name]
    calls = []

    class Record(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is op:
                calls.append((args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    for info in (o for o in op_db if o.name == name):
        for dtype in (torch.float32, torch.float64):
            for sample in info.sample_inputs("cpu", dtype):
                with Record():
                    info.op(sample.input, *sample.args, **sample.kwargs)
    for args, kwargs in calls:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # triangular_solve's deprecation notice
            actual = ACCELERATOR_DECOMPOSITIONS[op](*args, **kwargs)
        _check(actual, op(*args, **kwargs), (name, args, kwargs))
    assert len(calls) > 10


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 6, 2), (0, 3), (3, 0), (2, 0, 0)])
def test_qr_every_mode_and_shape(mode, shape):
    x = torch.randn(shape, dtype=torch.float64)
    _check(ACCELERATOR_DECOMPOSITIONS[aten.linalg_qr.default](x, mode), aten.linalg_qr(x, mode), (mode, shape))


def test_solves_keep_atens_layout_and_special_values():
    """Both sides, from row- and column-major inputs; a zero on the diagonal gives ATen's
    infinities and NaNs (no error), unitriangular ignores the diagonal."""
    op = aten.linalg_solve_triangular.default
    A = torch.randn(4, 4, dtype=torch.float64).triu() + 4 * torch.eye(4, dtype=torch.float64)
    B = torch.randn(4, 4, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for left in (True, False):
            for a in (A, A.mT.contiguous().mT):
                for b in (B, B.mT):
                    for unit in (True, False):
                        kw = dict(upper=True, left=left, unitriangular=unit)
                        _check(ACCELERATOR_DECOMPOSITIONS[op](a, b, **kw), op(a, b, **kw), kw)
        singular = A.clone()
        singular[1, 1] = 0
        actual = ACCELERATOR_DECOMPOSITIONS[op](singular, B, upper=True)
    assert_close(actual, op(singular, B, upper=True), equal_nan=True)


def test_lu_solve_broadcasts_and_keeps_infinities():
    """Batches broadcast between LU and B; the permutation moves rows (an infinity in B
    stays one row's, as ATen's swaps leave it, where a product with P would spread NaNs)."""
    op = aten.linalg_lu_solve.default
    LU, pivots = torch.linalg.lu_factor(torch.randn(2, 1, 4, 4, dtype=torch.float64))
    B = torch.randn(3, 4, 2, dtype=torch.float64)
    B[0, 1, 0] = float("inf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kwargs in ({}, {"adjoint": True}, {"left": False}, {"left": False, "adjoint": True}):
            b = B if kwargs.get("left", True) else B.mT
            actual, expected = ACCELERATOR_DECOMPOSITIONS[op](LU, pivots, b, **kwargs), op(LU, pivots, b, **kwargs)
            assert torch.equal(actual.isnan(), expected.isnan()), kwargs
            assert_close(actual, expected, equal_nan=True)
            assert _same_layout(actual, expected), kwargs


def test_geqrf_meta_gives_atens_layout():
    """The meta kernel eagerc adds for geqrf (torch has none) describes what ATen's CPU
    kernel returns, which the compiled wrapper checks the extern's result against."""
    for shape in [(5, 3), (3, 5), (2, 5, 3), (4, 2, 3, 3)]:
        a, tau = torch.geqrf(torch.randn(shape))
        ma, mtau = torch.geqrf(torch.empty(shape, device="meta"))
        assert (ma.shape, ma.stride(), mtau.shape, mtau.stride()) == (a.shape, a.stride(), tau.shape, tau.stride())
    with pytest.raises(RuntimeError, match="input must have at least 2 dimensions"):
        torch.geqrf(torch.empty(3, device="meta"))


_ON_DEVICE = SERVED_BY_KERNELS + textwrap.dedent("""
    import warnings, torch, eagerc
    torch.manual_seed(0)  # fixed inputs: each process draws other ones otherwise
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    warnings.simplefilter("ignore")
    aten = torch.ops.aten
    dev = lambda v: v.to("eagerc") if isinstance(v, torch.Tensor) else v
    calls = []
    for name in ("linalg.solve_triangular", "linalg.householder_product", "linalg.qr", "linalg.lu_solve"):
        info = next(o for o in op_db if o.name == name)
        samples = list(info.sample_inputs("cpu", torch.float32))
        for s in samples[:2] + samples[-2:]:
            calls.append((info.op, s.input, s.args, s.kwargs))
    for mode in ("complete", "r"):
        calls.append((torch.linalg.qr, torch.randn(2, 5, 3), (mode,), {}))
    for fn, x, args, kwargs in calls:
        expected = fn(x, *args, **kwargs)
        actual = fn(dev(x), *map(dev, args), **{k: dev(v) for k, v in kwargs.items()})
        actual, expected = (tuple(v) if isinstance(v, tuple) else (v,) for v in (actual, expected))
        for a, e in zip(actual, expected):
            assert a.device.type == "eagerc" and a.shape == e.shape, (fn, a, e)
            assert_close(a.cpu(), e)
    served_by_kernels(("linalg_solve_triangular", "linalg_householder_product", "linalg_qr", "linalg_lu_solve"),
                      no_aliases=True)
    print("OK")
""")


@pytest.mark.slow
def test_compiled_on_a_device_without_aliases():
    run_without_aliases(_ON_DEVICE)
