"""Decompositions eagerc uses for CPU code in place of Inductor's, where ATen's own CPU
kernel computes differently and faster.

softmax: torch._decomp divides every element by its row sum; ATen's CPU kernel takes the
reciprocal of the row sum once and multiplies (a vector division costs ~10x a
multiplication; 64x64 fp32: 5.4 us against ATen's 4.6). Multiplying by the reciprocal also
matches ATen's results more often bit for bit (60% of elements against 46% on 512x64
random rows); both are within the tolerance table either way.

The reciprocal is its own (realized) buffer, one value per row, computed in one vector
pass over the row sums. Left to Inductor it is inlined into the final loop, where the
C++ compiler cannot hoist it (the output store may alias the row sum, as far as it
knows): one scalar division per 16 elements, ~15% of the kernel at 64 columns. Realized,
the kernel also writes exp(x - max) straight into the output and scales it in place, as
ATen does, instead of through a per-call row buffer. Kernel alone, 1 thread: 64x64 3.2 us
against 4.2 us inlined (ATen 4.1); 2048x2048 4.0 ms against 5.4 ms (ATen 4.0).

max_pool2d_with_indices (floating point, windows up to 25 taps): ATen's loop, unrolled over
the window. Inductor's own lowering takes the index from an argmax over the window with
the padding as -inf taps, which differs from ATen's: a window of only -inf over the
padding got the index of a padding tap (negative: -5 for 3x3/2 padding 1 on an all -inf
4x4 input, where ATen gives 0), and a window with several NaNs the first NaN's (ATen: the
last). Here the value chain is maximum(tap, running), which compiles to ATen's test
(replace when greater or NaN), and the index is the last NaN's when the maximum is NaN,
else the first tap inside the input equal to the maximum: both exactly ATen's. Kernel
alone (3x3/2 padding 1 on 2x16x16x16, called through ctypes, three runs): 30.4-31.0 us
against 30.1-32.3 us for Inductor's lowering; ATen's kernel is ~25 us (perf samples),
28.5-29.6 us called from Python. Other dtypes and larger windows keep Inductor's
decomposition.
"""
from __future__ import annotations

import torch
from torch._inductor import inductor_prims

aten = torch.ops.aten


def _softmax_times_reciprocal(x, dim: int, half_to_float: bool):
    from torch._decomp.decompositions import _softmax_unbacked_safe_amax

    x = x.contiguous()  # eager's softmax output is contiguous
    low_precision = x.dtype in (torch.float16, torch.bfloat16)
    computed = x.to(torch.float32) if low_precision else x
    unnormalized = torch.exp(computed - _softmax_unbacked_safe_amax(computed, dim))
    reciprocal = torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    reciprocal = inductor_prims.force_stride_order(reciprocal, reciprocal.stride())  # realized
    result = unnormalized * reciprocal
    return result if half_to_float or not low_precision else result.to(x.dtype)


def _max_pool2d_as_atens_loop(x, kernel_size, stride=(), padding=0, dilation=1,
                              ceil_mode=False):
    from torch._inductor.decomposition import max_pool2d_with_indices as inductors
    from torch._inductor.lowering import should_fallback_max_pool_with_indices
    from torch._meta_registrations import max_pool2d_checks_and_compute_shape
    from torch._prims_common import suggest_memory_format

    if not x.dtype.is_floating_point or should_fallback_max_pool_with_indices(
            _pair(kernel_size), n_dim=2):
        return inductors(x, kernel_size, stride, padding, dilation, ceil_mode)
    kernel_size = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel_size
    padding, dilation = _pair(padding), _pair(dilation)
    _, out_h, out_w = max_pool2d_checks_and_compute_shape(x, kernel_size, stride, padding,
                                                          dilation, ceil_mode)
    height, width = x.shape[-2:]
    lead = [None] * (x.dim() - 2)

    # Loads from the input padded with -inf on every side, far enough that each window
    # lies inside (Inductor keeps the padding as a masked load, no buffer).
    padded = aten.constant_pad_nd(x, [padding[1], padding[1] + stride[1] - 1,
                                      padding[0], padding[0] + stride[0] - 1], float("-inf"))

    def taps(k: int, dim: int, out, size):
        # Per kernel offset: input coordinate of each output position, and whether it is
        # inside the input.
        pos = torch.arange(out, device=x.device) * stride[dim]
        for i in range(k):
            coord = pos + (i * dilation[dim] - padding[dim])
            yield coord, (coord >= 0) & (coord < size), coord + padding[dim]

    rows = list(taps(kernel_size[0], 0, out_h, height))
    cols = list(taps(kernel_size[1], 1, out_w, width))
    window = []  # (value, inside, flat index) per tap, in ATen's order (rows, then columns)
    for row, row_in, row_p in rows:
        for col, col_in, col_p in cols:
            inside = row_in[:, None] & col_in[None, :]
            value = aten._unsafe_index(padded, lead + [row_p[:, None], col_p[None, :]])
            window.append((value, inside, row[:, None] * width + col[None, :]))
    # ATen's loop: a tap replaces the running maximum when it is greater or NaN.
    # maximum(a, b) compiles to max_propagate_nan(a, b): a if a is NaN or a > b, else b.
    result = window[0][0]
    for value, _, _ in window[1:]:
        result = torch.maximum(value, result)
    # Its index is that of the last replacement: the last NaN when there is one, else the
    # first tap inside the input that equals the maximum (for a window of only -inf, ATen's
    # starting index, its first tap inside the input).
    first_max = window[-1][2]
    for value, inside, index in reversed(window[:-1]):
        first_max = torch.where(inside & (value == result), index, first_max)
    last_nan = window[0][2]
    for value, _, index in window[1:]:
        last_nan = torch.where(torch.isnan(value), index, last_nan)
    indices = torch.where(torch.isnan(result), last_nan, first_max)
    layout = suggest_memory_format(x)
    return result.contiguous(memory_format=layout), indices.contiguous(memory_format=layout)


def _pair(v) -> list:
    if isinstance(v, int):
        return [v, v]
    return [v[0], v[0]] if len(v) == 1 else list(v)


CPU_DECOMPOSITIONS = {
    aten._softmax.default: _softmax_times_reciprocal,
    aten.max_pool2d_with_indices.default: _max_pool2d_as_atens_loop,
}
