"""ATen's CPU linear interpolation (upsample_linear1d, upsample_bilinear2d,
upsample_trilinear3d: functional, .vec and out= forms of floating point) as a decomposition
for the C++ code generator.

torch._decomp's `_upsample_linear`, which Inductor traces, interpolates each dim as
`v0 + (v1 - v0) * lambda`: NaN where both neighbours are the same infinity (ATen: that
infinity). ATen weighs each neighbour, `v0 * w0 + v1 * w1`, so its NaNs are where a zero
weight meets an infinity (`0 * inf`) or opposite infinities meet: an output of a same-size
dim is `1 * v + 0 * v` (NaN for an infinite v), an output clamped to the first input
`1 * v0 + 0 * v1` (NaN for an infinite v1). Here each output is ATen's sum, with ATen's
indices and weights:

- per dim, input size n, output size m, in opmath (float for the half types): the scale is
  (n - 1) / (m - 1) with align_corners (0 for m == 1), else 1 / scale when one is given and
  positive (a double, rounded), else n / m; the source index is scale * i with align_corners,
  else scale * (i + 0.5) - 0.5, raised to 0 where negative;
- index0 = min(floor(source), n - 1) (floorf: a double source is rounded to float first),
  lambda1 = source - index0 clamped to [0, 1], index1 = index0 + 1 below the last input,
  lambda0 = 1 - lambda1. A dim whose size does not change: index0 = index1 = i, lambdas 1, 0.

ATen has two kernels, whose sums associate differently (last bits only; NaN and inf
positions are the same):
- the generic one (1-d always; 2-d and 3-d otherwise) nests dims, the last innermost, each
  level `t0 * w0 + t1 * w1`: for 2-d `(v00 * w0 + v01 * w1) * h0 + (...) * h1`;
- the channels-last one (2-d: a channels-last input with more than 3 channels, or output
  height + width at most 128; 3-d: a channels-last input with more than 3 channels) weighs
  the 2^d corners by products of lambdas (`h0 * w0`, ...) and sums them right-nested,
  t0 + (t1 + (t2 + t3)), over the channels of full vectors, left-nested over the channels
  past the last full vector (its scalar loop). The vector width is the CPU capability's
  (AVX512: 64 bytes, else 32).
ATen's AVX2 and AVX512 builds fuse multiply-adds (GCC contracts `a * b + c`): the source
index is fma(scale, i + 0.5, -0.5), a level of the generic sum fma(t0, w0, t1 * w1), the
scalar loop fma(v3, w3, fma(v2, w2, fma(v0, w0, v1 * w1))) and the vector loop
fma(v0, w0, fma(v1, w1, fma(v3, w3, v2 * w2))); they are fused here too (Inductor's fma).
float32 and float64 results are ATen's bit for bit. Half types compute in float as ATen
does, but ATen also rounds its stored lambdas and each vector operation to the half type,
which Inductor leaves out between fused operations: within a rounding of ATen's.
ATen also takes the channels-last kernel for 2-d input of 3 channels when it runs on one
thread; the thread count is not in a kernel's key, so that case keeps the generic sum.
Integer dtypes (uint8 bilinear) keep torch._decomp's decomposition.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

_HALF_TYPES = (torch.float16, torch.bfloat16)


def _opmath(dtype):
    return torch.float32 if dtype in _HALF_TYPES else dtype


def _dim_indices_weights(n, m, align_corners, scale, x, axis, ndims):
    """ATen's (index0, index1, lambda0, lambda1) of one dim, in opmath, shaped to broadcast
    along `axis` of the `ndims` interpolated dims."""
    opmath = _opmath(x.dtype)
    device = x.device
    shape = [m] + [1] * (ndims - 1 - axis)
    i = torch.arange(m, device=device)
    if n == m:
        zero = torch.zeros(shape, dtype=opmath, device=device)
        index = i.reshape(shape)
        return index, index, zero + 1, zero
    if align_corners:
        ratio = torch.full((), n - 1, dtype=opmath, device=device) / (m - 1) if m > 1 else \
            torch.zeros((), dtype=opmath, device=device)
        source = ratio * i.to(opmath)
    else:
        if scale is not None and scale > 0:
            ratio = torch.full((), 1.0 / scale, dtype=opmath, device=device)
        else:
            ratio = torch.full((), n, dtype=opmath, device=device) / m
        source = _multiply_add(ratio, i.to(opmath) + 0.5, -0.5)
        source = torch.where(source < 0, 0, source)
    index0 = torch.clamp(torch.floor(source.to(torch.float32)).to(torch.int64), max=n - 1)
    lambda1 = torch.clamp(source - index0.to(opmath), 0, 1)
    index1 = index0 + (index0 < n - 1).to(torch.int64)
    return (index0.reshape(shape), index1.reshape(shape),
            (1 - lambda1).reshape(shape), lambda1.reshape(shape))


def _atens_build_contracts() -> bool:
    """Whether ATen's kernel build contracts a * b + c into one fused multiply-add: its
    AVX2 and AVX512 builds (compiled with -mfma, GCC's default -ffp-contract=fast) do."""
    return torch.backends.cpu.get_cpu_capability() != "DEFAULT"


def _multiply_add(a, b, c):
    """a * b + c as ATen's kernel build computes it (fused, or rounded after the product)."""
    if not _atens_build_contracts():
        return a * b + c
    from torch._inductor import inductor_prims

    if not isinstance(c, torch.Tensor):
        c = torch.full((), c, dtype=a.dtype, device=a.device)
    return inductor_prims.fma(a, b, c)


def _corner(x, indices, opmath):
    return aten._unsafe_index(x, [None, None, *indices]).to(opmath)


def _generic_sum(x, dims, opmath):
    """ATen's generic kernel: dims nested, the last innermost, each level
    `t0 * w0 + t1 * w1` (the first product fused where ATen's build contracts)."""
    def level(k, chosen):
        if k == len(dims):
            return _corner(x, chosen, opmath)
        index0, index1, lambda0, lambda1 = dims[k]
        t0 = level(k + 1, chosen + [index0])
        t1 = level(k + 1, chosen + [index1])
        return _multiply_add(t0, lambda0, t1 * lambda1)

    return level(0, [])


def _vector_lanes(dtype) -> int:
    width = 64 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 32
    return width // torch.empty((), dtype=dtype).element_size()


def _channels_last_sum(x, dims, opmath):
    """ATen's channels-last kernel: corners weighed by products of opmath lambdas, summed
    right-nested over the channels of full vectors, left-nested over the rest."""
    weights, corners = [], []
    for choice in range(2 ** len(dims)):
        bits = [(choice >> (len(dims) - 1 - k)) & 1 for k in range(len(dims))]
        w = None
        for k, bit in enumerate(bits):
            lam = dims[k][3] if bit else dims[k][2]
            w = lam if w is None else w * lam
        weights.append(w)
        corners.append(_corner(x, [dims[k][bit] for k, bit in enumerate(bits)], opmath))

    # The scalar loop, in opmath: ((v0 * w0 + v1 * w1) + v2 * w2) + ...
    scalar = _multiply_add(corners[0], weights[0], corners[1] * weights[1])
    for v, w in zip(corners[2:], weights[2:]):
        scalar = _multiply_add(v, w, scalar)

    # The vector loop: v0 * w0 + (v1 * w1 + (... + vn * wn)); ATen's build fuses the last
    # product into the innermost sum, then each outer one.
    vector = _multiply_add(corners[-1], weights[-1], corners[-2] * weights[-2])
    for v, w in zip(reversed(corners[:-2]), reversed(weights[:-2])):
        vector = _multiply_add(v, w, vector)

    channels = x.shape[1]
    lanes = _vector_lanes(x.dtype)
    channel = torch.arange(channels, device=x.device).reshape([channels] + [1] * len(dims))
    return torch.where(channel < channels - channels % lanes, vector, scalar)


def _takes_channels_last_kernel(x, output_size) -> bool:
    channels = x.shape[1]
    if x.dim() == 4:
        return (x.is_contiguous(memory_format=torch.channels_last) and channels > 3) or \
            output_size[0] + output_size[1] <= 128
    if x.dim() == 5:
        return x.is_contiguous(memory_format=torch.channels_last_3d) and channels > 3
    return False


def upsample_linear_as_atens(x, output_size, align_corners, scales):
    """ATen's linear interpolation of `x` (N, C, *spatial) to `output_size` (module
    docstring); torch._decomp's for integer dtypes."""
    from torch._prims_common import suggest_memory_format

    if not x.dtype.is_floating_point:
        from torch._decomp.decompositions import _upsample_linear

        return _upsample_linear(x, output_size, align_corners, scales)
    opmath = _opmath(x.dtype)
    ndims = len(output_size)
    dims = [_dim_indices_weights(x.shape[2 + k], output_size[k], align_corners, scales[k], x, k, ndims)
            for k in range(ndims)]
    if _takes_channels_last_kernel(x, output_size):
        result = _channels_last_sum(x, dims, opmath)
    else:
        result = _generic_sum(x, dims, opmath)
    return result.to(x.dtype).contiguous(memory_format=suggest_memory_format(x))


def upsample_linear1d(x, output_size, align_corners, scales_w=None):
    return upsample_linear_as_atens(x, output_size, align_corners, [scales_w])


def upsample_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    return upsample_linear_as_atens(x, output_size, align_corners, [scales_h, scales_w])


def upsample_trilinear3d(x, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None):
    return upsample_linear_as_atens(x, output_size, align_corners, [scales_d, scales_h, scales_w])


def upsample_linear_vec(x, output_size, align_corners, scale_factors):
    """The .vec forms: ATen's output size and per-dim scales from either argument."""
    from torch._decomp.decompositions import upsample_compute_output_size

    size = upsample_compute_output_size(x.size(), output_size, scale_factors)
    scales = scale_factors if scale_factors else [None] * len(size)
    return upsample_linear_as_atens(x, size, align_corners, scales)


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    entries = {}
    for name, fn in (("upsample_linear1d", upsample_linear1d),
                     ("upsample_bilinear2d", upsample_bilinear2d),
                     ("upsample_trilinear3d", upsample_trilinear3d)):
        packet = getattr(aten, name)
        entries[packet.default] = fn
        entries[packet.out] = out_wrapper()(fn)
        entries[packet.vec] = upsample_linear_vec
        if "vec_out" in packet.overloads():
            entries[packet.vec_out] = out_wrapper()(upsample_linear_vec)
    return entries
