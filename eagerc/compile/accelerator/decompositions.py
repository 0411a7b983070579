"""Decompositions for targets whose device has no kernels of its own to lean on.

On the eagerc device over host memory (and over GPU memory), an op eagerc cannot compile
as generated code runs an ATen kernel of the memory's home: as an extern the artifact
calls (`aoti_torch_cpu_cummax`), or on zero-copy aliases. A vendor's accelerator has
neither. For such a target (`Target.native_kernels` false: a new device whose aliases are
off, EAGERC_ALIAS_FALLBACK=0), these ops are traced into ops Inductor generates code for:

- scans (cummax, cummin, logcumsumexp): a Hillis-Steele scan, log2(n) steps of "combine
  each element with the one 2^k before it" over the scanned dim moved last. Each step is
  pointwise, so the kernel is generated code; the step count comes from the dim's size,
  which the kernel's guard then holds (one kernel per power-of-two size class). The
  combine is ATen's CPU loop's: cummax takes the later element when it is NaN or, the
  earlier not being NaN, >= the earlier (ties and NaNs go to the last index), which is
  associative, so the scan gives ATen's values and indices.
- median, nanmedian, kthvalue: a stable sort along the dim and a gather at the rank ATen
  picks (median of a row with a NaN: its first NaN; nanmedian: the lower middle of the
  non-NaN values, the first NaN when there are none). Where the code generator sorts
  (Triton) this is generated code; host C++ sorts through ATen's sort (an extern).
- histc: each element's bin by ATen's linear formula, counted per bin as a reduction over
  the elements (bins x elements comparisons, no scatter); histogram over given edges the
  same way, an element's bin counted from the edges below it (ATen's upper_bound).
- bucketize: the boundaries its binary search steps past, counted (a reduction over the
  boundaries per element).
- take: an index into the flattened tensor through a 1-d index.
- hash_tensor: the elements' bits (floats as float64) xor-reduced (prims.xor_sum).
- special functions and orthogonal polynomials the code generator has no code for
  (special.py, polynomials.py): pointwise code over functions it has;
  Hermite, Laguerre and Legendre as ATen's recurrence in a while_loop (one kernel of
  pointwise steps per iteration, to each element's own degree).
- isin: a broadcast comparison reduced with any(). torch._decomp's isin picks a sort-based
  path by a float power of the sizes, a guard eagerc cannot express.
- normal with tensor arguments and multinomial (random_ops.py): draws through
  rand/randn, which Inductor generates code for, with ATen's value checks as asserts.
- linalg_solve_triangular, linalg_householder_product, linalg_qr (linalg.py):
  through the solvers the code generator's C shim lists (triangular_solve, geqrf, ormqr),
  which the artifact calls as externs.
- linalg_lu_factor_ex and what ATen builds on it (linalg_lu, _linalg_det, _linalg_slogdet,
  linalg_inv_ex, _linalg_solve_ex; lu.py): LAPACK's unblocked LU with partial
  pivoting unrolled as generated code, up to 16 columns; linalg_cholesky_ex and cholesky
  the same way (cholesky.py).
- _upsample_bilinear2d_aa (resample.py): ATen's separable anti-aliasing
  weights as dense matrices, applied by matmul.
- ATen's fused LSTM and GRU cells and their backwards (rnn_cells.py), which only CUDA
  has kernels for: pointwise code. Targets with native kernels trace them too where the
  memory's home has no kernel for them (for_home_gaps: the CPU, for host memory).
- batch_norm_stats (batch_norm_stats.py), a CUDA-only piece of SyncBatchNorm: a
  reduction, for home gaps alike.

Not here: ops whose output shape depends on values (bincount, unique), histogram with a
bin count (eagerc does not compile its float[] range argument: it runs on aliases), and
what has no pointwise or recurrence form in PyTorch yet.
"""
from __future__ import annotations

import functools

import torch
from torch._inductor import inductor_prims
from torch._prims_common.wrappers import out_wrapper

aten = torch.ops.aten

# A change here that changes the code a decomposition produces moves the key's
# accelerator_decompositions component (eagerc/kernel_key.py), which a target that uses
# them is keyed by.


def _scan(x, dim: int, combine, pad_value, *extra):
    """Inclusive scan of `x` (and `extra` tensors carried along) over `dim` with
    `combine(earlier, later) -> tuple`, each a tuple (x, *extra)."""
    if x.dim() == 0:
        return (x.clone(), *[e.clone() for e in extra])
    dim = dim % x.dim()
    state = tuple(t.movedim(dim, -1) for t in (x, *extra))
    n = state[0].shape[-1]
    step = 1
    while step < n:
        shifted = tuple(_shift(t, step, pad) for t, pad in zip(state, (pad_value, *[0] * len(extra))))
        # Each step its own buffer: inlined into the next, step k recomputes 2^k elements
        # of the first (cummax 64x64: 1.6 ms against ATen's 5 us).
        state = tuple(_realized(t) for t in combine(shifted, state))
        step *= 2
    return tuple(t.movedim(-1, dim).contiguous() for t in state)


def _realized(t):
    """`t` (contiguous) as a buffer of its own. Forced through a 1-d view: Inductor's
    force_stride_order sorts the strides it is given, and with symbolic sizes (s0*s1 > 1)
    torch 2.11's sort asks sympy for a truth value it cannot give (the scans failed to
    lower on Triton)."""
    return inductor_prims.force_stride_order(t.reshape(-1), (1,)).view(t.shape)


def _shift(t, step: int, pad_value):
    """`t` moved `step` places along its last dim, the first `step` places `pad_value`."""
    head = torch.full((*t.shape[:-1], step), pad_value, dtype=t.dtype, device=t.device)
    return torch.cat([head, t.narrow(-1, 0, t.shape[-1] - step)], -1)


def _cum_extreme(later_wins):
    def combine(earlier, later):
        (ev, ei), (lv, li) = earlier, later
        take = torch.isnan(lv) | (~torch.isnan(ev) & later_wins(lv, ev))
        return torch.where(take, lv, ev), torch.where(take, li, ei)

    def decomposition(x, dim):
        shape = [1] * x.dim()
        indices = torch.zeros_like(x, dtype=torch.int64)
        if x.dim():
            d = dim % x.dim()
            shape[d] = x.shape[d]
            indices = torch.arange(x.shape[d], device=x.device).view(shape).expand(x.shape)
        pad = float("-inf") if later_wins is torch.ge else float("inf")
        if not x.dtype.is_floating_point:
            info = torch.iinfo(x.dtype) if x.dtype != torch.bool else None
            pad = (info.min if pad < 0 else info.max) if info else (pad > 0)
        return _scan(x, dim, combine, pad, indices)

    return decomposition


def _log_add_exp(earlier, later):
    # ATen's _log_add_exp_helper: two equal infinities stay what they are.
    (x,), (y,) = earlier, later
    low = torch.where(torch.isnan(y), y, torch.minimum(x, y))
    high = torch.where(torch.isnan(y), y, torch.maximum(x, y))
    keep = (low == high) & ~torch.isfinite(low)
    return (torch.where(keep, x, high + torch.log1p(torch.exp(low - high))),)


def _logcumsumexp(x, dim):
    return _scan(x, dim, _log_add_exp, float("-inf"))[0]


def _sorted_pick(x, dim, rank):
    """Values and indices of `x` sorted stably along `dim` at `rank` (a tensor with
    `dim` kept as size 1)."""
    values, indices = torch.sort(x, dim=dim, stable=True)
    return values.gather(dim, rank), indices.gather(dim, rank)


def _as_rows(x, dim):
    return (x.unsqueeze(0), 0) if x.dim() == 0 else (x, dim % x.dim())


def _median_dim(x, dim=-1, keepdim=False, ignore_nan=False):
    rows, d = _as_rows(x, dim)
    n = rows.shape[d]
    nans = torch.isnan(rows).sum(d, keepdim=True)
    if ignore_nan:
        valid = n - nans
        rank = torch.where(valid > 0, (valid - 1) // 2, 0)
    else:  # a row with a NaN: its first NaN, which a stable sort puts at n - nans
        rank = torch.where(nans > 0, n - nans, torch.full_like(nans, (n - 1) // 2))
    values, indices = _sorted_pick(rows, d, rank)
    if x.dim() == 0:
        return values.squeeze(0), indices.squeeze(0)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return values, indices


def _median(x):
    return _median_dim(x.reshape(-1), 0)[0] if x.numel() else torch.full((), float("nan"), dtype=x.dtype, device=x.device)


def _nanmedian(x):
    return _median_dim(x.reshape(-1), 0, ignore_nan=True)[0] if x.numel() else torch.full((), float("nan"), dtype=x.dtype, device=x.device)


def _nanmedian_dim(x, dim=-1, keepdim=False):
    return _median_dim(x, dim, keepdim, ignore_nan=True)


def _kthvalue(x, k, dim=-1, keepdim=False):
    rows, d = _as_rows(x, dim)
    shape = list(rows.shape)
    shape[d] = 1
    rank = torch.full(shape, k - 1, dtype=torch.int64, device=x.device)
    values, indices = _sorted_pick(rows, d, rank)
    if x.dim() == 0:
        return values.squeeze(0), indices.squeeze(0)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return values, indices


def _histc(x, bins=100, min=0, max=0):
    # ATen's histc: the data's range when min == max, widened by one each side if it is
    # still empty; bin = (x - low) / (high - low) * bins, the right edge into the last bin.
    flat = x.reshape(-1)
    low = torch.full((), min, dtype=x.dtype, device=x.device)
    high = torch.full((), max, dtype=x.dtype, device=x.device)
    if min == max and flat.numel():
        low, high = torch.amin(flat), torch.amax(flat)
    empty = low == high
    low, high = torch.where(empty, low - 1, low), torch.where(empty, high + 1, high)
    inside = (flat >= low) & (flat <= high)
    position = ((flat - low) / (high - low) * bins).to(torch.int64)
    position = torch.where(position == bins, bins - 1, position)
    each_bin = torch.arange(bins, device=x.device)[:, None]
    return ((position[None, :] == each_bin) & inside[None, :]).sum(1).to(x.dtype)


def _histogram_bins(x, bins, *, weight=None, density=False):
    # ATen's histogram over given edges: an element's bin is the number of edges <= it,
    # less one (upper_bound), the rightmost edge into the last bin, elements outside the
    # edges (and NaN) in none; weights summed; density divides by the total, then by the
    # bin widths.
    flat = x.reshape(-1)
    edges = bins.reshape(-1)
    count = edges.shape[0] - 1
    inside = (flat >= edges[0]) & (flat <= edges[-1])
    position = (edges[:, None] <= flat[None, :]).sum(0) - 1
    position = torch.where(position == count, count - 1, position)
    hit = (position[None, :] == torch.arange(count, device=x.device)[:, None]) & inside[None, :]
    each = torch.ones_like(flat) if weight is None else weight.reshape(-1).to(x.dtype)
    hist = torch.where(hit, each[None, :], torch.zeros((), dtype=x.dtype, device=x.device)).sum(1)
    if density:
        hist = hist / hist.sum()
        hist = hist / (edges[1:] - edges[:-1])
    return hist, bins.clone()


def _histogramdd_bins(x, bins, *, weight=None, density=False):
    # ATen's histogramdd over given edges: the last dim of `x` holds each point's
    # coordinates; per coordinate the bin as in _histogram_bins, a point outside any
    # dim's edges (or NaN) in no cell; cells counted (weights summed) as a reduction over
    # the points; density divides by the total, then by each dim's bin widths.
    dims = len(bins)
    points = x.reshape(-1, dims)
    counts = [b.shape[0] - 1 for b in bins]
    cell = torch.zeros(points.shape[0], dtype=torch.int64, device=x.device)
    inside = torch.ones(points.shape[0], dtype=torch.bool, device=x.device)
    for d, edges in enumerate(bins):
        coordinate = points[:, d]
        inside = inside & (coordinate >= edges[0]) & (coordinate <= edges[-1])
        position = (edges[:, None] <= coordinate[None, :]).sum(0) - 1
        cell = cell * counts[d] + torch.where(position == counts[d], counts[d] - 1, position)
    cells = 1
    for c in counts:
        cells *= c
    hit = (cell[None, :] == torch.arange(cells, device=x.device)[:, None]) & inside[None, :]
    each = torch.ones_like(points[:, 0]) if weight is None else weight.reshape(-1).to(x.dtype)
    hist = torch.where(hit, each[None, :], torch.zeros((), dtype=x.dtype, device=x.device)).sum(1)
    hist = hist.reshape(counts)
    if density:
        hist = hist / hist.sum()
        for d, edges in enumerate(bins):
            shape = [1] * dims
            shape[d] = counts[d]
            hist = hist / (edges[1:] - edges[:-1]).reshape(shape)
    return hist


def _bucketize(x, boundaries, *, out_int32=False, right=False):
    # ATen's binary search as a count over the (1-d, sorted) boundaries: those for which
    # its step moves right, !(b >= x) (right: !(b > x)); so NaN lands past the last.
    if not isinstance(x, torch.Tensor):  # Scalar
        x = torch.full((), x, dtype=boundaries.dtype, device=boundaries.device)
    below = ~(boundaries > x[..., None]) if right else ~(boundaries >= x[..., None])
    return below.sum(-1).to(torch.int32 if out_int32 else torch.int64)


def _isin(elements, test_elements, *, assume_unique=False, invert=False):
    if not isinstance(elements, torch.Tensor):  # Scalar_Tensor
        found = (test_elements == elements).any()
    elif not isinstance(test_elements, torch.Tensor):  # Tensor_Scalar
        found = elements == test_elements
    else:
        found = (elements.reshape(-1)[:, None] == test_elements.reshape(-1)[None, :]).any(1)
        found = found.reshape(elements.shape)
    return ~found if invert else found


def _hash_tensor(x, dim=(), *, keepdim=False, mode=0):
    # ATen's mode 0: the xor of every element's bits, floats as float64, integers and
    # bools as int64, read as uint64; an xor reduction Inductor generates (prims.xor_sum).
    if mode != 0:
        raise NotImplementedError(f"hash_tensor mode {mode}")
    bits = x.to(torch.float64).view(torch.int64) if x.is_floating_point() else x.to(torch.int64)
    dim = [dim] if isinstance(dim, int) else list(dim)
    dims = sorted({d % max(x.dim(), 1) for d in dim}) if dim else list(range(x.dim()))
    dims = [d for d in dims if d < x.dim()]  # a 0-dim tensor's dim 0 reduces nothing
    hashed = torch.ops.prims.xor_sum(bits, dims) if dims else bits.clone()
    if keepdim:
        for d in sorted(dims):
            hashed = hashed.unsqueeze(d)
    return hashed.view(torch.uint64)


def _take(x, index):
    # Through a 1-d index: Inductor's take indexes with the index as given, and a 0-dim
    # one was read as a Python int while tracing (over a fake: a garbage value).
    return aten.index(x.reshape(-1), [index.reshape(-1)]).reshape(index.shape)


def special_for(codegen) -> dict:
    """Decompositions of the special functions (special.py, polynomials.py) code generator
    `codegen`'s code has no implementation of (Inductor's pointwise_overrides_data names
    none for it: Codegen.has_pointwise)."""
    from torch._inductor.codegen.common import pointwise_overrides_data

    from eagerc.compile.accelerator import polynomials, special

    table = {}
    for key, fn in {**special.table(), **polynomials.POLYNOMIALS}.items():
        data = pointwise_overrides_data.get(key)
        if data is None or codegen.has_pointwise(data):
            continue
        packet = getattr(aten, data.name)
        for name in packet.overloads():
            overload = getattr(packet, name)
            is_out = any(a.is_out for a in overload._schema.arguments)
            table[overload] = out_wrapper()(fn) if is_out else fn
    return table


@functools.lru_cache(maxsize=None)
def for_home_gaps(home: str) -> dict:
    """The decompositions a target with native kernels traces with: eagerc's own for ops
    that neither its memory's home `home` ("cpu", "cuda") nor the CPU (the host round
    trip) has a kernel for, so that no rung but a compiled kernel could serve them."""
    from eagerc.compile.accelerator import batch_norm_stats, rnn_cells

    gaps = {**rnn_cells.table(), **batch_norm_stats.table()}
    return {op: fn for op, fn in gaps.items() if not _kernel_on(op, home) and not _kernel_on(op, "cpu")}


def _kernel_on(op, device_type: str) -> bool:
    return torch._C._dispatch_has_computed_kernel_for_dispatch_key(
        op.name(), torch._C._dispatch_key_for_device(device_type))


def for_codegen(codegen) -> dict:
    """The decompositions a target whose code generator is `codegen` (eagerc/codegen/)
    traces with where it has no native kernels."""
    return {**ACCELERATOR_DECOMPOSITIONS, **special_for(codegen)}


def _table() -> dict:
    table = {}

    def add(packet, fn, *out_names):
        for name in packet.overloads():
            overload = getattr(packet, name)
            is_out = any(a.is_out for a in overload._schema.arguments)
            table[overload] = out_wrapper(*out_names)(fn) if is_out else fn

    add(aten.cummax, _cum_extreme(torch.ge), "values", "indices")
    add(aten.cummin, _cum_extreme(torch.le), "values", "indices")
    add(aten.logcumsumexp, _logcumsumexp)
    table[aten.median.default] = _median
    table[aten.median.dim] = _median_dim
    table[aten.median.dim_values] = out_wrapper("values", "indices")(_median_dim)
    table[aten.nanmedian.default] = _nanmedian
    table[aten.nanmedian.dim] = _nanmedian_dim
    table[aten.nanmedian.dim_values] = out_wrapper("values", "indices")(_nanmedian_dim)
    table[aten.kthvalue.default] = _kthvalue
    table[aten.kthvalue.values] = out_wrapper("values", "indices")(_kthvalue)
    add(aten.histc, _histc)
    add(aten.isin, _isin)
    add(aten.bucketize, _bucketize)
    table[aten.histogram.bins_tensor] = _histogram_bins
    table[aten.histogram.bins_tensor_out] = out_wrapper("hist", "bin_edges")(_histogram_bins)
    add(aten._histogramdd_from_bin_tensors, _histogramdd_bins)
    add(aten.take, _take)
    add(aten.hash_tensor, _hash_tensor)
    from eagerc.compile.accelerator import (batch_norm_stats, cholesky, linalg, lu, random_ops, resample,
                                            rnn_cells)

    table.update(random_ops.table())
    table.update(linalg.table())
    table.update(lu.table())
    table.update(cholesky.table())
    table.update(resample.table())
    table.update(rnn_cells.table())
    table.update(batch_norm_stats.table())
    return {op: fn for op, fn in table.items() if "dimname" not in op._schema.overload_name}


ACCELERATOR_DECOMPOSITIONS = _table()
