"""Accelerator decomposition of anti-aliased bilinear resampling (_upsample_bilinear2d_aa).

ATen's CPU kernel is separable: along each resized dim, output index i averages the input
indices [xmin, xmin + xsize) with triangle-filter weights normalized to sum 1 (the filter
stretched by the scale when downsampling, which is the anti-aliasing). Here the weights of
each dim are a dense (output x input) matrix, zero outside each row's window, computed as
ATen computes them (float32 arithmetic for float32 input), and the image is multiplied by
them along W and then H: two matmuls (the code generator's mm/bmm), the rest generated code.

ATen's per-dim quantities, for input size n, output size m:
- scale: (n - 1) / (m - 1) with align_corners (0 for m == 1), else 1 / scales_x when given
  and positive, else n / m; support = scale when scale >= 1, else 1 (bilinear's half width);
- center_i = scale * (i + 0.5); xmin = max(trunc(center - support + 0.5), 0);
  xsize = min(trunc(center + support + 0.5), n) - xmin, at most ceil(support) * 2 + 1;
- weight of input j: max(0, 1 - |(j - center + 0.5) / max(scale, 1)|), divided by the
  window's total (a zero total leaves them zero);
- a dim whose size does not change is copied as it is.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _scale(n, m, align_corners, given, like):
    if align_corners:
        value = (n - 1) / (m - 1) if m > 1 else 0.0
    elif given is not None and given > 0:
        value = 1.0 / given
    else:
        return torch.scalar_tensor(n, dtype=like.dtype, device=like.device) / m
    return torch.scalar_tensor(value, dtype=like.dtype, device=like.device)


def _weights(n, m, align_corners, given, like):
    """The (m x n) matrix of ATen's normalized anti-aliasing weights for one dim."""
    scale = _scale(n, m, align_corners, given, like)
    one = torch.ones((), dtype=like.dtype, device=like.device)
    support = torch.where(scale >= 1, scale, one)
    invscale = torch.where(scale >= 1, 1 / scale, one)
    widest = torch.ceil(support) * 2 + 1
    center = scale * (torch.arange(m, device=like.device, dtype=like.dtype) + 0.5)
    xmin = torch.clamp_min((center - support + 0.5).to(torch.int64), 0)
    xsize = torch.clamp(torch.clamp_max((center + support + 0.5).to(torch.int64), n) - xmin, 0)
    xsize = torch.minimum(xsize, widest.to(torch.int64))
    j = torch.arange(n, device=like.device)
    inside = (j[None, :] >= xmin[:, None]) & (j[None, :] < (xmin + xsize)[:, None])
    distance = ((j[None, :] - center[:, None] + 0.5) * invscale).abs()
    w = torch.where(inside & (distance < 1), 1 - distance, torch.zeros((), dtype=like.dtype, device=like.device))
    total = w.sum(1, keepdim=True)
    return torch.where(total != 0, w / total, w)


def upsample_bilinear2d_aa(x, output_size, align_corners, scales_h=None, scales_w=None):
    if x.dtype not in (torch.float32, torch.float64):
        # ATen computes the weights of reduced-precision input in float, of uint8 as int16.
        raise NotImplementedError(f"_upsample_bilinear2d_aa of {x.dtype}")
    n_h, n_w = x.shape[-2:]
    m_h, m_w = output_size
    out = x
    # ATen resamples only the dims whose size changes (a dim of the same size is copied,
    # whatever scale is given for it), along W first.
    if n_w != m_w:
        out = torch.matmul(out, _weights(n_w, m_w, align_corners, scales_w, x).mT)
    if n_h != m_h:
        out = torch.matmul(_weights(n_h, m_h, align_corners, scales_h, x), out)
    if out is x:
        out = x.clone()
    # ATen's output takes the input's suggested memory format.
    channels_last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
    return out.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    return {aten._upsample_bilinear2d_aa.default: upsample_bilinear2d_aa,
            aten._upsample_bilinear2d_aa.out: out_wrapper()(upsample_bilinear2d_aa)}
