"""Accelerator decompositions of random ops with tensor arguments (normal, multinomial).

A target without native kernels (decompositions.py) would run these on the host:
Inductor keeps `prims.normal` (torch._refs' normal) as a call back into Python, and has no
lowering for multinomial. Here they draw through `aten.rand`/`aten.randn`, which Inductor's
seed pass turns into its own generated random numbers, so the kernel is generated code.
The stream differs from ATen's (as every compiled random op's does); the distribution is
ATen's, which the coverage sweep checks statistically. They draw from the default
generator only: a call with an explicit generator is not compiled (see _no_generator).

ATen's value checks (std >= 0, a multinomial's weights) are a `_assert_async` in the
kernel: it raises, and the holder re-runs eager's kernel, which raises eager's error. A GPU
target refuses the ones that check values (value_checks.py): they take the next rung.
"""
from __future__ import annotations

import torch

from eagerc.compile.accelerator.value_checks import assert_values

aten = torch.ops.aten


def _check_std(std):
    if isinstance(std, torch.Tensor):
        assert_values((std >= 0).all(), "normal expects all elements of std >= 0.0")
    elif isinstance(std, torch.SymFloat):  # a lifted float: its value is a runtime input
        assert_values(torch.scalar_tensor(std, dtype=torch.float64) >= 0,
                            f"normal expects std >= 0.0, but found std {std}")
    # A plain float is in the kernel's key: eager checked this very value on the miss.


def _normal(mean, std, dtype, shape):
    _check_std(std)
    noise = torch.randn(shape, dtype=dtype, device=_device(mean, std))
    # ATen: the standard draw, times std, plus mean, each rounded into the output's dtype.
    return (noise * std).to(dtype).add(mean).to(dtype)


def _device(*values):
    return next(v.device for v in values if isinstance(v, torch.Tensor))


def _shape(mean, std):
    shapes = [v.shape for v in (mean, std) if isinstance(v, torch.Tensor)]
    return torch.broadcast_shapes(*shapes)


def normal_tensor_tensor(mean, std, *, generator=None):
    _no_generator(generator)
    return _normal(mean, std, mean.dtype, _shape(mean, std))


def normal_tensor_float(mean, std=1.0, *, generator=None):
    _no_generator(generator)
    return _normal(mean, std, mean.dtype, mean.shape)


def normal_float_tensor(mean, std, *, generator=None):
    _no_generator(generator)
    return _normal(mean, std, std.dtype, std.shape)


def _no_generator(generator):
    if generator is not None:
        # A generator's state cannot be a kernel's input. The holder never compiles a call
        # with an explicit generator (csrc/signature.cpp refuses its signature): it runs
        # the memory home's kernel with the generator's home state (csrc/home_generator.h),
        # which gives eager's numbers for its seed. Raised for any other caller.
        raise NotImplementedError("a random op with an explicit generator")


def multinomial(p, num_samples, replacement=False, *, generator=None):
    _no_generator(generator)
    # ATen's value checks, each a condition eager raises for (its message follows from
    # eager's own kernel, which the holder re-runs when the kernel raises).
    valid = (p >= 0).all() & torch.isfinite(p).all() & (p.sum(-1) > 0).all()
    assert_values(valid, "invalid multinomial distribution")
    if not replacement or num_samples == 1:
        # ATen's way: argmax/top-k of p / q with q ~ Exp(1) (the Gumbel-max trick with the
        # exponential taken out): sampling without replacement in proportion to p.
        q = -torch.log1p(-torch.rand(p.shape, dtype=p.dtype, device=p.device))
        keys = p / q
        if num_samples == 1:
            return keys.argmax(-1, keepdim=True)
        return torch.topk(keys, num_samples, -1).indices
    # With replacement, ATen's binary search as a count: a uniform draw u in [0, 1) takes
    # the category of the first normalized cumulative weight >= u, the last one exactly 1.
    categories = p.shape[-1]
    cumulative = torch.cumsum(p, -1, dtype=p.dtype)
    cumulative = cumulative / cumulative[..., -1:]
    last = torch.arange(categories, device=p.device) == categories - 1
    cumulative = torch.where(last, torch.ones((), dtype=p.dtype, device=p.device), cumulative)
    u = torch.rand((*p.shape[:-1], num_samples), dtype=p.dtype, device=p.device)
    return (cumulative[..., None, :] < u[..., :, None]).sum(-1)


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    t = {aten.normal.Tensor_Tensor: normal_tensor_tensor, aten.normal.Tensor_float: normal_tensor_float,
         aten.normal.float_Tensor: normal_float_tensor}
    t[aten.normal.Tensor_Tensor_out] = out_wrapper()(normal_tensor_tensor)
    t[aten.normal.Tensor_float_out] = out_wrapper()(normal_tensor_float)
    t[aten.normal.float_Tensor_out] = out_wrapper()(normal_float_tensor)
    t[aten.multinomial.default] = multinomial
    t[aten.multinomial.out] = out_wrapper()(multinomial)
    return t
