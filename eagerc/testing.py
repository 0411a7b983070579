"""The one tolerance table for comparing eagerc results with native eager, per dtype.

Compiled kernels may reassociate reductions and fuse ops (e.g. exp and sum in softmax),
so results differ from eager by rounding. Tests, benchmarks and reports all compare
through :func:`assert_close` so one table decides what "equal" means.

    >>> import torch
    >>> from eagerc.testing import assert_close
    >>> assert_close(torch.ones(2), torch.ones(2))
"""
from __future__ import annotations

import torch

# dtype -> (rtol, atol). Half types: two units in the last place (2 * 2**-10 for float16,
# 2 * 2**-7 for bfloat16): Inductor computes them in float32 and rounds once, eager's CPU
# kernels round at other steps, so one-ulp differences either way are rounding, not errors.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
# Whole models accumulate rounding over many layers.
MODEL_TOLERANCES = {
    torch.float64: (1e-6, 1e-6),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def assert_close(actual, expected, *, model: bool = False, **kwargs) -> None:
    """torch.testing.assert_close with eagerc's per-dtype tolerances (exact for ints and
    bools); nested tuples/lists/dicts are compared element by element."""
    table = MODEL_TOLERANCES if model else TOLERANCES
    dtype = _first_float_dtype(expected)
    if dtype in table and "rtol" not in kwargs:
        kwargs["rtol"], kwargs["atol"] = table[dtype]
    torch.testing.assert_close(actual, expected, **kwargs)


def _first_float_dtype(value):
    if isinstance(value, torch.Tensor):
        return value.dtype if value.is_floating_point() else None
    if isinstance(value, (list, tuple)):
        for v in value:
            d = _first_float_dtype(v)
            if d is not None:
                return d
    if isinstance(value, dict):
        return _first_float_dtype(list(value.values()))
    return None
