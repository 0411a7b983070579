"""Compare a device's results with CPU eager: values through eagerc.testing's one
tolerance table; statistics for random ops; metadata only where values are undefined
(``empty*``). Each returns None when they agree, else a dict saying how they differ.

    >>> import torch
    >>> from eagerc.coverage.check import values
    >>> values(torch.ones(3), torch.ones(3)) is None
    True
    >>> values(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))["max_abs"]
    0.5
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from eagerc.testing import assert_close


def _tensors(value) -> list:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _shape_dtype(actual, expected):
    try:
        return _compare_shape_dtype(actual, expected)
    except RuntimeError as e:  # nested / mkldnn tensors have no sizes to compare
        return {"message": f"cannot compare: {str(e).splitlines()[0][:200]}"}


def _compare_shape_dtype(actual, expected):
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    if spec_a != spec_e:
        return {"message": f"output structure differs: {spec_a} vs {spec_e}"[:300]}
    for i, (a, e) in enumerate(zip(flat_a, flat_e)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return {"message": f"output {i}: {type(a).__name__} instead of a tensor"}
            if a.shape != e.shape or a.dtype != e.dtype:
                return {"message": f"output {i}: {a.dtype}{list(a.shape)} instead of {e.dtype}{list(e.shape)}"}
    return None


def worst_error(actual, expected) -> dict:
    """The largest absolute and relative differences over all tensor outputs."""
    worst = {"max_abs": 0.0, "max_rel": 0.0, "output": None}
    for i, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected))):
        if a.shape != e.shape or a.numel() == 0:
            continue
        a64, e64 = a.detach().to(torch.complex128 if a.is_complex() else torch.float64), \
            e.detach().to(torch.complex128 if e.is_complex() else torch.float64)
        both_nan = torch.isnan(a64) & torch.isnan(e64)
        diff = (a64 - e64).abs().masked_fill(both_nan, 0).nan_to_num(nan=float("inf"))
        rel = diff / e64.abs().clamp_min(1e-30)
        max_abs, max_rel = float(diff.max()), float(rel.masked_fill(diff == 0, 0).max())
        if max_abs > worst["max_abs"] or worst["output"] is None:
            worst = {"max_abs": max_abs, "max_rel": max_rel, "output": i}
    return worst


def without(undefined: set, actual, expected):
    """`actual` and `expected` with the outputs at flat indices `undefined` reduced to
    their shape and dtype (zeros of the same metadata on both sides)."""
    if not undefined:
        return actual, expected
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    if spec_a != spec_e:
        return actual, expected
    for i in undefined:
        if isinstance(flat_a[i], torch.Tensor) and isinstance(flat_e[i], torch.Tensor):
            flat_a[i], flat_e[i] = torch.zeros_like(flat_a[i]), torch.zeros_like(flat_e[i])
    return tree_unflatten(flat_a, spec_a), tree_unflatten(flat_e, spec_e)


def values(actual, expected):
    try:
        assert_close(actual, expected, equal_nan=True)
        return None
    except (AssertionError, TypeError, ValueError, RuntimeError) as e:
        problem = _shape_dtype(actual, expected) or worst_error(actual, expected)
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        return {**problem, "message": problem.get("message") or (lines[0][:300] if lines else type(e).__name__)}


def metadata(actual, expected):
    return _shape_dtype(actual, expected)


def _moments_agree(a, e) -> bool:
    """Means within 4 standard errors of their difference (two independent draws differ by
    ~sqrt((sa^2 + se^2) / n); 4 of that is chance once in ~15,000), spreads within 2x."""
    ma, me, sa, se = float(a.mean()), float(e.mean()), float(a.std()), float(e.std())
    n = min(a.numel(), e.numel())
    if abs(ma - me) > 4 * ((sa * sa + se * se) / n) ** 0.5 + 0.05 * abs(me) + 1e-3:
        return False
    return 0.5 <= sa / se <= 2.0 if se > 1e-6 else sa <= 1e-3


def _quantiles_agree(a, e) -> bool:
    """Medians within half an interquartile range, ranges within 2x: for heavy tails
    (cauchy_, log_normal_), whose mean and variance are no guide."""
    qa = torch.quantile(a.float()[:16_000_000], torch.tensor([0.25, 0.5, 0.75])).tolist()
    qe = torch.quantile(e.float()[:16_000_000], torch.tensor([0.25, 0.5, 0.75])).tolist()
    iqr_a, iqr_e = qa[2] - qa[0], qe[2] - qe[0]
    if abs(qa[1] - qe[1]) > 0.5 * max(iqr_a, iqr_e) + 0.05 * abs(qe[1]) + 1e-3:
        return False
    return 0.5 <= iqr_a / iqr_e <= 2.0 if iqr_e > 1e-6 else iqr_a <= 1e-3


def statistics(actual, expected):
    """Random ops: same structure, shapes and dtypes; for outputs of 64 or more elements,
    a draw like CPU eager's: mean and standard deviation, or (heavy tails) median and
    interquartile range, agree (:func:`_moments_agree`, :func:`_quantiles_agree`). A
    loose check: it catches a kernel that returns zeros, a constant or the wrong
    distribution, not a subtle bias."""
    problem = _shape_dtype(actual, expected)
    if problem:
        return problem
    for i, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected))):
        if a.numel() < 64 or a.is_complex():
            continue
        a64, e64 = a.detach().double().flatten(), e.detach().double().flatten()
        if bool(torch.isfinite(a64).all()) != bool(torch.isfinite(e64).all()):
            return {"message": f"output {i}: finite values differ from CPU eager's draw"}
        a64, e64 = a64[torch.isfinite(a64)], e64[torch.isfinite(e64)]
        if a64.numel() < 64 or e64.numel() < 64:
            continue
        if not (_moments_agree(a64, e64) or _quantiles_agree(a64, e64)):
            return {"message": f"output {i}: mean {float(a64.mean()):.4g} std {float(a64.std()):.4g} "
                               f"median {float(a64.median()):.4g}, CPU eager's draw: mean "
                               f"{float(e64.mean()):.4g} std {float(e64.std()):.4g} median "
                               f"{float(e64.median()):.4g}"}
    return None
