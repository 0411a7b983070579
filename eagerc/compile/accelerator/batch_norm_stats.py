"""ATen's batch_norm_stats (a piece of SyncBatchNorm) as a decomposition.

Only CUDA implements it (ATen's CPU has no kernel), so a PrivateUse1 device on host memory
has nothing to run it on: it is traced from CUDA's math (aten/src/ATen/native/cuda/
Normalization.cu): per channel (dim 1), the mean and 1 / sqrt(var + eps) of the biased
variance, in the accumulate type (float32 for float16/bfloat16 inputs). These are the
save_mean and save_invstd of CPU's training-mode native_batch_norm.

Its partner batch_norm_elemt is not here: its out= form is CUDA's own kernel, not a
composite of the functional op, so the device serves neither (eagerc/device/cts_manifest.py).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _accumulate_type(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def batch_norm_stats(input, eps):
    torch._check(input.dim() >= 2, lambda: "batch_norm_stats: input must have at least 2 dimensions")
    compute = _accumulate_type(input.dtype)
    dims = [0] + list(range(2, input.dim()))
    x = input.to(compute)
    var, mean = torch.var_mean(x, dims, correction=0)
    return mean, torch.rsqrt(var + eps)


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    return {
        aten.batch_norm_stats.default: batch_norm_stats,
        aten.batch_norm_stats.out: out_wrapper("out0", "out1")(batch_norm_stats),
    }
