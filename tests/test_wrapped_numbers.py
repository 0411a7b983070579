"""A Python number where the schema says Tensor: ATen's Scalar overloads (remainder.Scalar,
fmod.Scalar, pow.Scalar) call the Tensor overload with a 0-dim "wrapped number" tensor,
which reaches eagerc's Python side as the number (eagerc/aten_meta.py callable_for).
Eager's check on a miss and the trace must still run the call; before, override mode
raised "Expected a value of type 'Tensor'" for `x % 3` on CPU tensors."""
from __future__ import annotations

import pytest
import torch

import eagerc

# Integer remainders: a floating one runs eager's kernel (Inductor's differs from ATen's
# fmod-based one: compile/known_wrong.py), below.
CASES = {
    "remainder int by int": lambda x: torch.remainder(x.long(), 5),
    "x % 3": lambda x: x.long() % 3,
    "fmod by int": lambda x: torch.fmod(x, 5),
    # Promotion follows the wrapped number's rules: an int tensor by a float -> float32.
    "int fmod by float": lambda x: torch.fmod(x.long(), 2.5),
    "int fmod by int": lambda x: torch.fmod(x.long(), 2),
    "pow number by tensor": lambda x: torch.pow(2, x),
    "remainder.Scalar overload": lambda x: torch.ops.aten.remainder.Scalar(x.long(), 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_override_mode_compiles_scalar_overloads(case, fresh_cache):
    fn = CASES[case]
    x = torch.arange(-12.0, 13.0).view(5, 5)
    want = fn(x)
    eagerc.reset_stats()
    with eagerc.enabled("cpu"):
        for _ in range(2):  # a miss, then a hit
            got = fn(x)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    stats = eagerc.stats()
    assert stats["fallbacks"] == 0, {k: v["fallback_reasons"] for k, v in stats["ops"].items()}
    assert stats["hits"] >= 1


def test_a_floating_remainder_by_a_number_runs_eagers_kernel(fresh_cache):
    # remainder.Scalar's wrapped number reaches the refusal like a tensor divisor: eager's
    # bits, the known-wrong reason recorded, nothing raised.
    x = torch.arange(-12.0, 13.0).view(5, 5)
    eagerc.reset_stats()
    with eagerc.enabled("cpu"):
        got = x % 3
    torch.testing.assert_close(got, torch.arange(-12.0, 13.0).view(5, 5) % 3, rtol=0, atol=0)
    reasons = eagerc.stats()["ops"]["aten::remainder.Tensor@CPU"]["fallback_reasons"]
    assert any("remainder" in r for r in reasons), reasons
