"""A value check inside an accelerator decomposition: a condition on the call's values that
eager raises for (a Cholesky input that is not positive-definite, a negative std).

In host code (the C++ target) the check is an `_assert_async`: a failed check raises, and
the kernel holder has eager's kernel raise eager's error. On a GPU it would be a device-side
assert, which leaves the process's CUDA context unusable for every later call; and Inductor
runs a GPU graph's kernels once while compiling them, on random values that fail such checks
for a call that passes them. So where the traced values live on a GPU the decomposition is
refused, and the op takes the next rung (docs/vendor.md)."""
from __future__ import annotations

import torch


def assert_values(condition: torch.Tensor, message: str) -> None:
    if condition.device.type != "cpu":
        raise NotImplementedError(f"a value check ({message}) on {condition.device.type} memory: a failed "
                                  "check in a GPU kernel is a device-side assert")
    torch._assert_async(condition, message)
