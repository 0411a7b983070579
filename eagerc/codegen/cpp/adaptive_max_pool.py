"""ATen's CPU adaptive_max_pool2d (functional and out= forms of floating point) as a
decomposition for the C++ code generator.

ATen's loop, per output position, walks its window [floor(i * n / m), ceil((i + 1) * n / m))
rows then columns, starting at -inf with the index of the window's first tap, and takes a
tap when it is greater than the running maximum or NaN: a window with several NaNs gives
the last NaN's index, of tied maxima the first wins (value and sign), a window of only -inf
keeps its first tap. Inductor's own forms differ for NaNs: its lowering (windows that do
not divide the input) and torch._decomp's global pooling (amax, argmax) give the first
NaN's index. Evenly dividing windows go through max_pool2d_with_indices, whose CPU
decomposition is ATen's loop already (cpu_decompositions.py).

Here: global pooling as reductions (the last NaN's index where the plane has a NaN, else
argmax's first maximum; the value read at that index), other windows as ATen's loop
unrolled over the largest window, taps outside a position's window masked. Windows of more
than 25 taps keep Inductor's lowering, which calls ATen's kernel for them.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

_MOST_TAPS = 25  # Inductor's own limit for an unrolled window (lowering.py)


def _global(x):
    flat = x.flatten(-2)
    positions = torch.arange(flat.shape[-1], device=x.device)
    nan = torch.isnan(flat)
    last_nan = torch.amax(torch.where(nan, positions, -1), dim=-1)
    index = torch.where(nan.any(dim=-1), last_nan, torch.argmax(flat, dim=-1)).unsqueeze(-1)
    value = torch.gather(flat, -1, index)
    return value.unsqueeze(-1), index.unsqueeze(-1)


def _window_bounds(n_in, n_out, device):
    i = torch.arange(n_out, device=device)
    return (i * n_in) // n_out, ((i + 1) * n_in + n_out - 1) // n_out


def _loop(x, output_size, taps_h, taps_w):
    height, width = x.shape[-2:]
    lead = [None] * (x.dim() - 2)
    row0, row_end = _window_bounds(height, output_size[0], x.device)
    col0, col_end = _window_bounds(width, output_size[1], x.device)
    row0, row_end = row0[:, None], row_end[:, None]
    col0, col_end = col0[None, :], col_end[None, :]
    result = aten._unsafe_index(x, lead + [row0, col0])
    indices = row0 * width + col0
    for i in range(taps_h):
        for j in range(taps_w):
            if i == 0 and j == 0:
                continue  # the first tap starts the chain
            row, col = row0 + i, col0 + j
            inside = (row < row_end) & (col < col_end)
            value = aten._unsafe_index(x, lead + [torch.clamp(row, max=height - 1),
                                                  torch.clamp(col, max=width - 1)])
            take = inside & ((value > result) | torch.isnan(value))
            result = torch.where(take, value, result)
            indices = torch.where(take, row * width + col, indices)
    return result, indices


def _largest_window(x, output_size):
    """Rows and columns of the largest window: ceil((n + m - 1) / m)."""
    height, width = x.shape[-2:]
    out_h, out_w = output_size
    return (height + 2 * out_h - 2) // out_h, (width + 2 * out_w - 2) // out_w


def _keeps_inductors_lowering(x, output_size) -> bool:
    out_h, out_w = output_size
    height, width = x.shape[-2:]
    if not x.dtype.is_floating_point or out_h * out_w <= 1 or (height % out_h == 0 and width % out_w == 0):
        return False
    taps_h, taps_w = _largest_window(x, output_size)
    return taps_h * taps_w > _MOST_TAPS


def adaptive_max_pool2d_as_atens(x, output_size):
    """ATen's adaptive_max_pool2d of floating `x` (module docstring); torch._decomp's and
    Inductor's forms where they are ATen's already."""
    from torch._decomp.decompositions import adaptive_max_pool2d as torchs
    from torch._prims_common import suggest_memory_format

    out_h, out_w = output_size
    if not x.dtype.is_floating_point or out_h == 0 or out_w == 0:
        return torchs(x, output_size)
    height, width = x.shape[-2:]
    if out_h == 1 and out_w == 1:
        result, indices = _global(x)
    elif height % out_h == 0 and width % out_w == 0:
        return torchs(x, output_size)
    elif _keeps_inductors_lowering(x, output_size):
        return NotImplemented
    else:
        result, indices = _loop(x, output_size, *_largest_window(x, output_size))
    layout = suggest_memory_format(x)
    return result.contiguous(memory_format=layout), indices.contiguous(memory_format=layout)


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    into_outs = out_wrapper("out", "indices")(adaptive_max_pool2d_as_atens)

    def out_form(x, output_size, *, out, indices):
        if _keeps_inductors_lowering(x, output_size):
            return NotImplemented
        return into_outs(x, output_size, out=out, indices=indices)

    return {aten.adaptive_max_pool2d.default: adaptive_max_pool2d_as_atens,
            aten.adaptive_max_pool2d.out: out_form}
