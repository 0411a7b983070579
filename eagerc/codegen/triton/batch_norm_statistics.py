"""Inference batch norm with statistics that do not feed its output.

On a GPU, native_batch_norm in inference also returns the running mean (a copy) and the
inverse standard deviation per channel, as native CUDA's does. torch._decomp computes the
output from those very tensors, so Inductor makes them buffers of their own and the
output's kernel reads them: three kernels, one after the other, for every call (ResNet-50
has 53 per forward). Here the two statistics are computed again, from the running
statistics, for the caller: the output's kernel keeps its own copies inline, the three
kernels are independent, and combo kernels launch them as one (PATCHES, which the Triton
code generator compiles these calls under).
The values are torch._decomp's, operation for operation.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _default(op):
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table().get(op) or torch._decomp.decomposition_table[op]


def _statistics(running_mean, running_var, eps: float, dtype):
    return running_mean.to(dtype=dtype, copy=True), 1 / torch.sqrt(running_var.to(dtype=dtype) + eps)


def _with_own_statistics(results, running_mean, running_var, eps):
    output, save_mean, save_invstd = results
    if save_mean.numel() == 0:  # CPU's form: no statistics returned
        return results
    return (output, *_statistics(running_mean, running_var, eps, save_invstd.dtype))


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    results = _default(aten.native_batch_norm.default)(input, weight, bias, running_mean, running_var,
                                                        training, momentum, eps)
    if training or running_mean is None or running_var is None:
        return results
    return _with_own_statistics(results, running_mean, running_var, eps)


def native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    results = _default(aten._native_batch_norm_legit_no_training.default)(
        input, weight, bias, running_mean, running_var, momentum, eps)
    return _with_own_statistics(results, running_mean, running_var, eps)


DECOMPOSITIONS = {aten.native_batch_norm.default: native_batch_norm,
                  aten._native_batch_norm_legit_no_training.default: native_batch_norm_legit_no_training}


# Inference batch norm on a GPU: besides its output, the op returns the running mean (a
# copy) and the inverse standard deviation per channel, as native CUDA's native_batch_norm
# does (ResNet-50 has 53 per forward; docs/benchmarks.md). The argument index of
# `training` where the op has one.
EVAL_BATCH_NORMS = {"aten::native_batch_norm": 5, "aten::_native_batch_norm_legit_no_training": None}
# Combo kernels launch its three kernels as one; they can because the decompositions above
# keep the output from reading the returned statistics. The output kernel is tiled in one
# dimension (triton.max_tiles=1), as measured on the H100; a probe of Inductor alone gave
# one launch with or without it. One configuration: autotuning a combo kernel compiles each
# of its configurations in turn (eagerc compiles Triton in-process), which made ResNet-50's
# first forward on GPU memory run past 100 s on an H100.
PATCHES = {"combo_kernels": True, "combo_kernels_autotune": 0, "triton.max_tiles": 1}


def is_eval_batch_norm(op_qualname: str, args) -> bool:
    if op_qualname not in EVAL_BATCH_NORMS:
        return False
    index = EVAL_BATCH_NORMS[op_qualname]
    return index is None or (len(args) > index and args[index] is False)
