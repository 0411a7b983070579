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

max_pool2d_with_indices (floating point, windows up to 25 taps): ATen's CPU loop, unrolled
over the window as one chain. Inductor's own lowering takes the index from an argmax over
the window with the padding as -inf taps, which differs from ATen's: a window of only -inf
over the padding got the index of a padding tap (negative: -5 for 3x3/2 padding 1 on an all
-inf 4x4 input, where ATen gives 0), and a window with several NaNs the first NaN's (ATen:
the last). Here, as in ATen, the index starts at the window's first tap inside the input
(its start, stepped by the dilation past the padding: index arithmetic, no loads) and the
maximum at -inf; each tap, rows then columns, replaces both when it is greater than the
running maximum or NaN. Taps over the padding read -inf from the padded input and never
replace. So a window of only -inf keeps its first inside tap's index, several NaNs give the
last NaN's, a NaN stays against larger values (x > NaN is false), and of tied zeros the
first wins, value and sign: ATen's values and indices, bit for bit. One chain, because
three (the value through maximum(), the index of the first tap equal to it, the last NaN's
index) compute the same results but load every tap once per chain behind a mask. One hit
(3x3/2 padding 1 on 2x16x16x16 float32, 1 thread, medians of alternating rounds against
native on the dev machine): 0.93-0.99x native in five runs, against 1.15-1.37x for three
chains; in the quietest pair, 25.7 us against 34.3 us (native 26.3-26.6). Other dtypes and
larger windows keep Inductor's decomposition.

floor_divide and div(rounding_mode="floor") of floating point: ATen's div_floor
(c10::div_floor_floating, its CPU kernel's vector form alike): the quotient of a - fmod(a, b)
by b, less one where the remainder's sign is not b's, floored (rounded up past .5), a zero
quotient signed as a / b, and a / b itself where b is 0. Inductor floors a / b, which differs
for infinite a (ATen: NaN, from fmod), finite a over infinite b (-5 // inf: ATen -1, Inductor
-0) and where a / b rounds up to an integer (1 // 0.1: ATen 9, Inductor 10). float32 and
float64 compute in their own dtype as ATen does. float16 and bfloat16 compute in float32 and
round once where b is one value (a Python number or a one-element tensor): ATen takes the
divisor as float there (`iter.is_scalar(2)`). Otherwise ATen computes in the half type and
rounds its intermediate steps (its vector and scalar loops differently), which no float32
kernel reproduces: compile/known_wrong.py refuses those calls. Integer dtypes keep
Inductor's decomposition (exact; a zero divisor runs eager's kernel, which raises).

adaptive_max_pool2d: ATen's loop, as max_pool2d's, where Inductor's forms give the first of
several NaNs' index (adaptive_max_pool.py).

multi_margin_loss: ATen's loop adds a class's margin term only where z = margin - x[target]
+ x[d] is greater than 0 (and d is not the target), weight included. torch._decomp clamps z
at 0 and masks the target after weighing, so a NaN z stayed NaN (ATen: not counted) and a
z <= 0 times an infinite weight was NaN (ATen: not counted). Rows are summed and divided by
the class count; their sum or mean accumulates in double as ATen's does.

upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d: ATen's weighted sums, where
torch._decomp's interpolation gives NaN for two equal infinite neighbours
(upsample_linear.py).
"""
from __future__ import annotations

import torch
from torch._prims_common.wrappers import out_wrapper

from eagerc.codegen.cpp import adaptive_max_pool, upsample_linear
from eagerc.compile.known_wrong import divisor_is_one_value

aten = torch.ops.aten

# A change here that changes the code a decomposition produces moves the "decompositions"
# entry of the C++ code generator's compiler settings (generator.py, in the cache key), so
# kernels built with an older one are not hits. Importing this module does not import
# Inductor.


def _softmax_times_reciprocal(x, dim: int, half_to_float: bool):
    from torch._decomp.decompositions import _softmax_unbacked_safe_amax
    from torch._inductor import inductor_prims

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

    def starts(dim: int, out):
        # Per output position: input coordinate of the window's first tap, and of its first
        # tap inside the input (stepped by the dilation past the padding; index arithmetic
        # only, no loads). Selects, not a floor division: with one, Inductor's compile failed
        # ("vr must not be None for symbol q2").
        start = torch.arange(out, device=x.device) * stride[dim] - padding[dim]
        if dilation[dim] == 1:
            return start, torch.clamp(start, min=0)
        first = start + (kernel_size[dim] - 1) * dilation[dim]
        for i in reversed(range(kernel_size[dim] - 1)):
            coord = start + i * dilation[dim]
            first = torch.where(coord >= 0, coord, first)
        return start, first

    row0, first_row = starts(0, out_h)
    col0, first_col = starts(1, out_w)
    taps = [(i * dilation[0], j * dilation[1])  # ATen's order: rows, then columns
            for i in range(kernel_size[0]) for j in range(kernel_size[1])]
    # ATen's loop as one chain: a tap replaces the running maximum, and its index, when it
    # is greater or NaN. The maximum starts at -inf and the index at the first tap inside
    # the input. Taps over the padding read -inf and never replace. The first tap can start
    # the chain itself: it is either the first tap inside (same index) or padding (-inf).
    result, indices = None, first_row[:, None] * width + first_col[None, :]
    for di, dj in taps:
        row, col = row0 + di, col0 + dj
        value = aten._unsafe_index(padded, lead + [(row + padding[0])[:, None],
                                                   (col + padding[1])[None, :]])
        if result is None:
            result = value
            continue
        take = (value > result) | torch.isnan(value)
        result = torch.where(take, value, result)
        indices = torch.where(take, row[:, None] * width + col[None, :], indices)
    # A one-tap window never takes the torch.where that broadcasts the indices.
    indices = indices.expand(result.shape)
    layout = suggest_memory_format(x)
    return result.contiguous(memory_format=layout), indices.contiguous(memory_format=layout)


def _pair(v) -> list:
    if isinstance(v, int):
        return [v, v]
    return [v[0], v[0]] if len(v) == 1 else list(v)


_HALF_TYPES = (torch.float16, torch.bfloat16)


def _div_floor(a, b):
    """ATen's div_floor of floating point (module docstring), or None where it is not
    computed here (integer dtypes, a half type over a divisor of many values)."""
    dtype = torch.result_type(a, b)
    if not dtype.is_floating_point:
        return None
    compute = dtype
    if dtype in _HALF_TYPES:
        if not divisor_is_one_value(b):
            return None
        compute = torch.float32
    like = a if isinstance(a, torch.Tensor) else b
    a, b = (x.to(compute) if isinstance(x, torch.Tensor)
            else torch.scalar_tensor(x, dtype=compute, device=like.device) for x in (a, b))
    quotient = a / b
    mod = torch.fmod(a, b)
    # ATen's vector form: where a / b overflows (a finite), a itself stands for a - mod
    # (Sleef's vector fmod, which Inductor's vector code calls too, is wrong there).
    div = torch.where(torch.isinf(quotient) & ~torch.isinf(a), a, a - mod) / b
    div = torch.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floordiv = torch.floor(div)
    floordiv = torch.where(div - floordiv > 0.5, floordiv + 1, floordiv)
    floordiv = torch.where(div == 0, torch.copysign(torch.zeros_like(quotient), quotient), floordiv)
    return torch.where(b == 0, quotient, floordiv).to(dtype)


def _floor_divide_as_atens(a, b):
    result = _div_floor(a, b)
    if result is None:
        from torch._inductor.decomposition import select_decomp_table

        return select_decomp_table()[aten.floor_divide.default](a, b)
    return result


def _div_mode_as_atens(a, b, *, rounding_mode=None):
    result = _div_floor(a, b) if rounding_mode == "floor" else None
    return NotImplemented if result is None else result  # None: Inductor's lowering


def _multi_margin_loss_as_atens(x, target, p=1, margin=1, weight=None, reduction=1):
    """ATen's multi_margin_loss (module docstring)."""
    torch._check(p == 1 or p == 2, lambda: "only p == 1 and p == 2 supported")
    one_row = target.dim() == 0  # 1-d input: without reduction, ATen's loss is a scalar
    rows_in = torch.atleast_2d(x)
    target = torch.atleast_1d(target).unsqueeze(1)
    classes = rows_in.shape[1]
    z = (margin - torch.gather(rows_in, 1, target)) + rows_in
    term = z if p == 1 else z * z
    if weight is not None:
        term = term * torch.atleast_1d(weight)[target]
    counted = (z > 0) & (torch.arange(classes, device=x.device) != target)
    rows = torch.where(counted, term, 0).sum(1) / classes
    if reduction == 0:
        return rows.reshape(()) if one_row else rows
    accumulate = torch.float64 if x.dtype in (torch.float32, torch.float64) else torch.float32
    total = rows.to(accumulate).sum()
    if reduction == 1:
        total = total / rows.shape[0]
    return total.to(x.dtype)


CPU_DECOMPOSITIONS = {
    **upsample_linear.table(),
    **adaptive_max_pool.table(),
    aten._softmax.default: _softmax_times_reciprocal,
    aten.max_pool2d_with_indices.default: _max_pool2d_as_atens_loop,
    aten.floor_divide.default: _floor_divide_as_atens,
    aten.floor_divide.Scalar: _floor_divide_as_atens,
    aten.div.Tensor_mode: _div_mode_as_atens,
    aten.div.Scalar_mode: _div_mode_as_atens,
    aten.multi_margin_loss.default: _multi_margin_loss_as_atens,
    aten.multi_margin_loss.out: out_wrapper()(_multi_margin_loss_as_atens),
}
