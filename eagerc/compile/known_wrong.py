"""Calls Inductor compiles to different values than eager: refused before tracing.

Each entry was found by comparing with eager (python -m eagerc.coverage, OpInfo samples)
and reproduced with torch.compile itself, so it is Inductor's, not eagerc's. A refused
call runs eager's kernel (natively in override mode, on aliases on a host-memory device).
Re-check the entries with each torch release.

When an entry is added or a predicate widens, the key's known_wrong component moves
(eagerc/kernel_key.py's KNOWN_WRONG_VERSION), so a kernel compiled before its call was
refused is not served.
"""
from __future__ import annotations

import torch

_HALF_TYPES = (torch.float16, torch.bfloat16)


def _half(args) -> bool:
    return isinstance(args[0], torch.Tensor) and args[0].dtype in _HALF_TYPES


def divisor_is_one_value(b) -> bool:
    """ATen's CPU div_floor takes the divisor as one float (`iter.is_scalar(2)`): a number,
    or a tensor every output element reads the same element of."""
    return not isinstance(b, torch.Tensor) or b.numel() == 1


def _half_div_floor(a, b) -> bool:
    """A float16/bfloat16 floor division whose divisor has many values: ATen rounds each
    step to the half type (the C++ code generator computes the one-value case exactly:
    codegen/cpp/cpu_decompositions.py)."""
    return torch.result_type(a, b) in _HALF_TYPES and not divisor_is_one_value(b)


def _has_scales(args, first_scale: int) -> bool:
    return any(a is not None for a in args[first_scale:])


# op name, or name.overload -> (predicate on the call's arguments, why)
_WRONG = {
    # torch 2.13: the backward lowering ignores scales_h/scales_w: with scale 1.7 the
    # gradient of an 5x5 -> 8x8 upsample is off by ~2.3 (torch.compile alike).
    "upsample_nearest1d_backward": (lambda args: _has_scales(args, 3),
                                    "Inductor ignores explicit scales of nearest upsampling's backward"),
    "upsample_nearest2d_backward": (lambda args: _has_scales(args, 3),
                                    "Inductor ignores explicit scales of nearest upsampling's backward"),
    "upsample_nearest3d_backward": (lambda args: _has_scales(args, 3),
                                    "Inductor ignores explicit scales of nearest upsampling's backward"),
    # torch 2.13: with ceil_mode and count_include_pad, windows that run past the padded
    # input are divided by the wrong count (OpInfo avg_pool1d sample 2: off by ~0.1).
    "avg_pool2d_backward": (lambda args: bool(args[5]) and bool(args[6]),
                            "Inductor divides ceil-mode windows past the padding by the wrong count"),
    "avg_pool3d_backward": (lambda args: bool(args[5]) and bool(args[6]),
                            "Inductor divides ceil-mode windows past the padding by the wrong count"),
    # torch 2.13: in eval mode Inductor's decomposition returns an empty noise tensor where
    # eager returns the noise as given, and the out= form loses its resized output.
    **{name: (lambda args: len(args) > 4 and not args[4],
              "Inductor's eval-mode rrelu_with_noise returns an empty noise")
       for name in ("rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise_functional")},
    # A g not shaped like the norm (v's shape with 1 in every dim but `dim`): eager's kernel
    # returns norms shaped like g and other values; Inductor's decomposition broadcasts.
    **{name: (lambda args: _g_not_norm_shaped(*args[:3]),
              "Inductor's weight norm differs from eager for a g not shaped like the norm")
       for name in ("_weight_norm_interface",)},
    # torch 2.13, CPU: the vectorized argmin of a bool row (a masked tail) picks a True:
    # min(x, dim) of [[True, False, True]] gave index 0 (torch.compile's static shapes do
    # not reach that path). max.dim of bool is right.
    "min.dim": (lambda args: isinstance(args[0], torch.Tensor) and args[0].dtype == torch.bool,
                "Inductor's vectorized bool argmin picks a wrong index"),
    # An integer input with a float threshold: eager casts the threshold to the input's
    # dtype (-5.5 -> -5, so -5 is replaced), Inductor compares in float (found by
    # tools/op_sweep.py). The float kind and the dtype are in the signature.
    **{name: (lambda args: isinstance(args[0], torch.Tensor) and not args[0].is_floating_point()
              and isinstance(args[1], float),
              "Inductor compares an integer input with a float threshold in float")
       for name in ("threshold", "threshold_")},
    # torch 2.13, CPU: Welford's mean of no elements is 0 where eager's is nan
    # (std_mean(empty) gave (nan, 0.)). Size 0 is in the signature.
    **{name: (lambda args: isinstance(args[0], torch.Tensor) and args[0].numel() == 0,
              "Inductor's mean of an empty reduction is 0, eager's nan")
       for name in ("var_mean", "std_mean")},
    # Inductor computes float16/bfloat16 in float32 and rounds the result: nextafter's
    # float32 neighbour rounds back to x (nextafter(1, -inf) in float16 gave 1, eager
    # 0.99951171875; from 65504 toward inf gave inf, eager 65504).
    **{name: (_half, "Inductor computes a float16/bfloat16 nextafter in float32")
       for name in ("nextafter", "nextafter_")},
    # ATen clamps a float16/bfloat16 logit to [eps, 1 - eps] computed in the half type
    # (1 - 1e-6 rounds to 1: logit(1) is inf), Inductor in float32 (gave 13.80).
    **{name: (lambda args: _half(args) and len(args) > 1 and args[1] is not None,
              "Inductor clamps a float16/bfloat16 logit to 1 - eps in float32")
       for name in ("logit", "logit_")},
    # Half-type floor division by a divisor of many values (cpu_decompositions.py).
    **{name: (lambda args: _half_div_floor(args[0], args[1]),
              "ATen rounds each step of a float16/bfloat16 floor division to the half type")
       for name in ("floor_divide", "floor_divide_")},
    **{name: (lambda args: len(args) > 2 and args[2] == "floor" and _half_div_floor(args[0], args[1]),
              "ATen rounds each step of a float16/bfloat16 floor division to the half type")
       for name in ("div.Tensor_mode", "div.Scalar_mode", "div.out_mode", "div.Scalar_mode_out",
                    "div_.Tensor_mode", "div_.Scalar_mode")},
    # Inductor's CPU remainder of floating point is a - floor(a / b) * b; ATen's is fmod's,
    # its sign moved to b's: by an infinite divisor Inductor gives NaN (remainder(1.5, inf)
    # and remainder(-5, -inf): eager 1.5 and -5), by a tiny one the quotient's rounding
    # shows (remainder(1.5, 1e-30) gave 0, eager 5.9e-31). Found by TorchCTS level 1.
    **{name: (lambda args: _floating_result(args[0], args[1]),
              "Inductor's floating remainder is a - floor(a / b) * b, not ATen's fmod")
       for name in ("remainder", "remainder_")},
    # torch 2.13: the decomposition of multilabel_margin_loss_forward sums the margins of
    # every position j as a target, the positions after a row's first -1 included (its
    # u[:, j] is the gathered input[:, 0] there): a (4, 5) input whose target rows end early
    # gave losses 2.5-6x eager's (torch.compile alike). Which targets end early is data,
    # not signature: every call is refused. Found by TorchCTS level 3.
    "multilabel_margin_loss_forward": (lambda args: True,
                                       "Inductor's multilabel margin loss counts positions after a target's -1"),
    # ATen interpolates uint8 bilinearly with int16 fixed-point weights, one dim after the
    # other, rounding to uint8 between them; torch._decomp's _upsample_linear rounds one
    # float interpolation (off by 1 in places: TorchCTS level 3, its exact comparison).
    "upsample_bilinear2d": (lambda args: isinstance(args[0], torch.Tensor) and args[0].dtype == torch.uint8,
                            "torch._decomp's uint8 bilinear upsampling is not ATen's fixed-point one"),
    # torch 2.13: the functional batch norms' decomposition returns the updated running
    # statistics in the computation's float32 where eager keeps their float16/bfloat16, in
    # training and in eval (the in-place forms copy them back). Found by TorchCTS
    # level 3's warm pass.
    **{name: (lambda args: _half(args[3:]),
              "Inductor's functional batch norm returns half running statistics as float32")
       for name in ("_native_batch_norm_legit_functional", "_batch_norm_with_update_functional")},
    # ATen's CPU gelu (approximate "none") of a contiguous float32/bfloat16 tensor of more
    # than one element is oneDNN's gelu_erf, and its backward oneDNN's too: gelu(inf) is NaN
    # there (inf in ATen's own loop and from Inductor), gelu(3e38) inf, and the tails of
    # the backward differ (gelu_backward at x = -10 gave -0 in ATen, 6.8e-22 compiled).
    # Found by TorchCTS level 1 (gelu_, gelu.out). float16 and float64 are ATen's own loop.
    **{name: (lambda args: _erf_gelu_of(args[0], args[1]), "ATen's float32/bfloat16 gelu is oneDNN's")
       for name in ("gelu", "gelu_", "gelu.out")},
    **{name: (lambda args: _erf_gelu_of(args[1], args[2]), "ATen's float32/bfloat16 gelu is oneDNN's")
       for name in ("gelu_backward", "gelu_backward.grad_input")},
}


def _erf_gelu_of(x, approximate) -> bool:
    return (isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.bfloat16)
            and approximate == "none")


def _floating_result(a, b) -> bool:
    return torch.result_type(a, b).is_floating_point


def _g_not_norm_shaped(v, g, dim) -> bool:
    dim = dim % v.dim() if v.dim() else 0
    norm = [s if i == dim else 1 for i, s in enumerate(v.shape)]
    return list(g.shape) != norm


def _bool_alpha(op, args) -> bool:
    """A bool tensor scaled by an alpha other than 0/1: Inductor multiplies in int64 and
    stores the int64 vector into the bool output (add(bool_a, bool_b, alpha=2) of [T, F]
    and [T, T] gave [T, F], eager [T, T]; with 6 elements the store ran past the buffer
    and glibc aborted: "malloc(): unaligned tcache chunk detected"; alpha=0 alike). Only
    alpha 1 (the default, no multiply) compiles right; 0 and 1 are in the signature, any
    other alpha is lifted, so the refusal is the signature's."""
    names = [a.name for a in op._schema.arguments]
    if "alpha" not in names:
        return False
    alpha = args[names.index("alpha")]
    return alpha != 1 and any(
        isinstance(a, torch.Tensor) and a.dtype == torch.bool for a in args)


def reason(op, args):
    """Why Inductor would compute this call wrongly, or None."""
    if _bool_alpha(op, args):
        return "Inductor stores a bool tensor times alpha as an int into bool bytes"
    name = op._schema.name.split("::")[-1]
    entry = _WRONG.get(f"{name}.{op._schema.overload_name}") or _WRONG.get(name)
    if entry is None:
        return None
    predicate, why = entry
    return why if predicate(tuple(args)) else None


def all_reasons() -> frozenset:
    """Every reason reason() can give: a fallback for one of them is eager's kernel by
    design, not a failure (warm_cache's report, the model tests)."""
    return frozenset({why for _, why in _WRONG.values()}
                     | {"Inductor stores a bool tensor times alpha as an int into bool bytes"})
