"""Inductor settings eagerc changes for some ops only, and what of them the cache key holds.

The rules live here as data so that the cache key can hold them (RECIPE): a kernel built
under one rule is not a hit once the rule changes (an inference batch norm cached under an
older rule would keep its older kernels).
"""
from __future__ import annotations

from eagerc.compile import known_wrong

# Ops whose vectorized Inductor kernel is slower than its scalar loop: a strided window
# becomes per-lane masked gathers through a stack buffer (max_pool2d_with_indices 3x3/2 on
# 2x16x16x16, 1 thread, a timing loop of the op: 106 us vectorized, 33 us scalar, 25 us ATen).
SCALAR_LOOPS = frozenset({"aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices"})
SCALAR_LOOP_PATCHES = {"cpp.simdlen": 1}

# Inference batch norm on a GPU: besides its output, the op returns the running mean (a
# copy) and the inverse standard deviation per channel, as native CUDA's native_batch_norm
# does (ResNet-50 has 53 per forward; docs/benchmarks.md). The argument index of
# `training` where the op has one.
EVAL_BATCH_NORMS = {"aten::native_batch_norm": 5, "aten::_native_batch_norm_legit_no_training": None}
# Combo kernels launch its three kernels as one; they can because the Triton code
# generator's decomposition keeps the output from reading the returned statistics
# (batch_norm_statistics.py). The output kernel is tiled in one dimension
# (triton.max_tiles=1), as measured on the H100; a probe of Inductor alone gave one launch
# with or without it. One configuration: autotuning a combo kernel compiles each of its
# configurations in turn (eagerc compiles Triton in-process), which made ResNet-50's first
# forward on GPU memory run past 100 s on an H100.
EVAL_BATCH_NORM_PATCHES = {"combo_kernels": True, "combo_kernels_autotune": 0, "triton.max_tiles": 1}

# With the calls refused as known to compile wrongly (compile/known_wrong.py's VERSION): a
# kernel compiled before its call was refused must not be a hit.
RECIPE = repr((sorted(SCALAR_LOOPS), SCALAR_LOOP_PATCHES, sorted(EVAL_BATCH_NORMS.items()),
               EVAL_BATCH_NORM_PATCHES, known_wrong.VERSION))


def is_eval_batch_norm(op_qualname: str, args) -> bool:
    if op_qualname not in EVAL_BATCH_NORMS:
        return False
    index = EVAL_BATCH_NORMS[op_qualname]
    return index is None or (len(args) > index and args[index] is False)


def patches_for(op_qualname: str, args, codegen_name: str) -> dict:
    """The Inductor settings this call of `op_qualname` compiles under, beyond eagerc's own."""
    patches = {}
    if op_qualname in SCALAR_LOOPS:
        patches.update(SCALAR_LOOP_PATCHES)
    if codegen_name == "triton" and is_eval_batch_norm(op_qualname, args):
        patches.update(EVAL_BATCH_NORM_PATCHES)
    return patches
