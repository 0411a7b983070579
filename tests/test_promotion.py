"""Arguments that change a result's dtype or values, in both modes, on a miss and on a hit.

A Python number's kind takes part in result-type promotion (int64 [1, 5].clamp(max=2.5) is
float32 [1.0, 2.5]); alpha on bool tensors; an out= dtype that a reduction computes in
(sum(float_x, 1, out=int64_out) sums the elements cast to int64); the mean of an empty
var_mean. Each call runs three times (the miss, then two hits of the kernel it left) and
is compared with CPU eager: dtype, values, strides. tests/test_op_sweep.py does the same
for OpInfo samples of many ops."""
from __future__ import annotations

import pytest
import torch

import eagerc

T = torch.tensor

CASES = {
    "int clamp max=2.5": lambda d: T([1, 5], device=d).clamp(max=2.5),
    "int clamp min=0.5 max=2": lambda d: T([1, 5], device=d).clamp(min=0.5, max=2),
    "int clip max=2.5": lambda d: T([1, 5], device=d).clip(max=2.5),
    "int8 clamp max=2.5": lambda d: T([1, 5], dtype=torch.int8, device=d).clamp(max=2.5),
    "int clamp max=2 stays int": lambda d: T([1, 5], device=d).clamp(max=2),
    "bool clamp min=2": lambda d: T([True, False], device=d).clamp(min=2),
    "bool clamp min=2.5": lambda d: T([True, False], device=d).clamp(min=2.5),
    "float clamp max=2": lambda d: T([1.5, 5.0], device=d).clamp(max=2),
    "bool add alpha=2": lambda d: torch.add(T([True, False], device=d), T([True, True], device=d), alpha=2),
    "bool add alpha=0": lambda d: torch.add(T([True, False] * 3, device=d), T([True, True] * 3, device=d), alpha=0),
    "bool add alpha=False": lambda d: torch.add(T([True, False] * 3, device=d), T([True, True] * 3, device=d), alpha=False),
    "bool add_ alpha=3": lambda d: T([False, False], device=d).add_(T([True, False], device=d), alpha=3),
    "int add alpha=2": lambda d: torch.add(T([1, 2], device=d), T([3, 4], device=d), alpha=2),
    "int + 2.5 (wrapped number)": lambda d: T([1, 2], device=d) + 2.5,
    "int8 * 3 stays int8": lambda d: T([1, 100], dtype=torch.int8, device=d) * 3,
    "bool * 2": lambda d: T([True, False], device=d) * 2,
    "int ** 2.0": lambda d: T([2, 3], device=d) ** 2.0,
    "int where scalar float": lambda d: torch.where(T([True, False], device=d), T([1, 2], device=d), 2.5),
    "int threshold -5.5": lambda d: torch.nn.functional.threshold(T([-6, -5, 3], device=d), -5.5, 7),
    "sum out=int64": lambda d: torch.sum(T([[0.5, 0.6], [-0.5, -0.7], [-1.5, 0.2]], device=d), 1,
                                         out=torch.empty(3, dtype=torch.int64, device=d)),
    "cumsum out=int64": lambda d: torch.cumsum(T([[0.5, 0.6], [-0.5, -0.7]], device=d), 1,
                                               out=torch.empty(2, 2, dtype=torch.int64, device=d)),
    "prod out=int64": lambda d: torch.prod(T([[1.5, 2.6], [-1.5, 3.7]], device=d), 1,
                                           out=torch.empty(2, dtype=torch.int64, device=d)),
    "sum out=half": lambda d: torch.sum(torch.linspace(-3, 7, 300, device="cpu").view(3, 100).to(d), 1,
                                        out=torch.empty(3, dtype=torch.half, device=d)),
    "std_mean of empty": lambda d: torch.std_mean(torch.empty(0, device=d)),
    "var_mean of empty": lambda d: torch.var_mean(torch.empty(0, device=d)),
    "var_mean of empty rows": lambda d: torch.var_mean(torch.empty(3, 0, device=d), 1),
}


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def _check(got, want):
    for g, w in zip(_as_tuple(got), _as_tuple(want), strict=True):
        g = g.cpu()
        assert g.dtype == w.dtype
        assert g.shape == w.shape and g.stride() == w.stride()
        if w.dtype in (torch.float16, torch.bfloat16):
            eagerc.testing.assert_close(g, w)  # two units in the last place
        else:
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("mode", ["override", "device"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_result_matches_eager_miss_and_hits(name, mode, fresh_cache):
    import eagerc.testing  # noqa: F401 - assert_close for half results

    call = CASES[name]
    want = call("cpu")  # before enabling: CPU eager
    if mode == "override":
        with eagerc.enabled("cpu"):
            for _ in range(3):
                _check(call("cpu"), want)
    else:
        for _ in range(3):
            _check(call("eagerc"), want)
