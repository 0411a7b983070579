"""The Chebyshev polynomials (T, U, V, W and the shifted four) as pointwise code, for code
generators with no implementation of them (Triton).

ATen evaluates P_n(x) at each element's own degree n (a float tensor truncated to an
integer) by the three-term recurrence, after its special cases: 0 for n < 0, the closed
values at x = +-1, and for |x| < 1 beyond a small degree the trigonometric form. Here
the recurrence is unrolled to degree _UNROLLED with each element picking the step equal to
its degree (torch.where); past that degree every element takes the closed form, which
holds for every degree: cos/sin of (n + c) acos(x) inside [-1, 1], cosh/sinh of
(n + c) acosh(|x|) outside it (float64, rounded once; where ATen's float32 recurrence
overflows to inf - inf = NaN this gives the infinity).

Not here: Hermite, Laguerre and Legendre, which have no closed form for a degree past any
unrolled bound: a kernel cannot loop to a degree it reads from its input.
"""
from __future__ import annotations

import torch

_UNROLLED = 16


def _operands(x, n):
    ref = x if isinstance(x, torch.Tensor) else n
    dtype = torch.result_type(x, n)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    x, n = (v if isinstance(v, torch.Tensor) else torch.full((), v, dtype=dtype, device=ref.device) for v in (x, n))
    x = x.to(dtype)
    # ATen's static_cast<int64_t>(n): truncation; NaN lands on INT64_MIN (negative).
    n = torch.where(torch.isnan(n), -1.0, torch.trunc(n.to(torch.float64))) if n.is_floating_point() \
        else n.to(torch.float64)
    x, n = torch.broadcast_tensors(x, n)
    return x, n


def _recurrence(x, n, first, two_x):
    """P_n(x) for 0 <= n <= _UNROLLED by P_{k+1} = two_x P_k - P_{k-1} from P_0 = 1,
    P_1 = first; elements of other degrees get P_{_UNROLLED}."""
    p, q = torch.ones_like(x), first
    result = torch.where(n == 0, p, q)
    for k in range(2, _UNROLLED + 1):
        p, q = q, two_x * q - p
        result = torch.where(n == k, q, result)
    return result


def _closed(kind: str, x, n):
    """The closed form at every x (float64): inside [-1, 1] through theta = acos(x),
    outside through t = acosh(|x|) with the parity of the degree for x < -1."""
    inside = torch.abs(x) <= 1
    theta = torch.acos(torch.clamp(x, -1, 1))
    t = torch.acosh(torch.clamp(torch.abs(x), min=1))
    odd = torch.remainder(n, 2) == 1
    sign = torch.where((x < 0) & odd, -1.0, 1.0)
    if kind == "t":
        return torch.where(inside, torch.cos(n * theta), sign * torch.cosh(n * t))
    if kind == "u":
        return torch.where(inside, torch.sin((n + 1) * theta) / torch.sin(theta),
                           sign * torch.sinh((n + 1) * t) / torch.sinh(t))
    # V_n(-x) = (-1)^n W_n(x): outside, x < -1 takes the other kind's form at |x|.
    cos_form = torch.cosh((n + 0.5) * t) / torch.cosh(t / 2)
    sin_form = torch.sinh((n + 0.5) * t) / torch.sinh(t / 2)
    if kind == "v":
        outside = torch.where(x > 0, cos_form, sign * sin_form)
        return torch.where(inside, torch.cos((n + 0.5) * theta) / torch.cos(theta / 2), outside)
    outside = torch.where(x > 0, sin_form, sign * cos_form)
    return torch.where(inside, torch.sin((n + 0.5) * theta) / torch.sin(theta / 2), outside)


# kind -> (P_1(x), its value at x = 1, at x = -1, the degree past which ATen takes the
# trigonometric form for |x| < 1)
_KINDS = {
    "t": (lambda x: x, lambda n: 1.0, lambda n, odd: torch.where(odd, -1.0, 1.0), 6),
    "u": (lambda x: x + x, lambda n: n + 1, lambda n, odd: torch.where(odd, -(n + 1), n + 1), 8),
    "v": (lambda x: x + x - 1, lambda n: 1.0, lambda n, odd: torch.where(odd, -(n + n + 1), n + n + 1), 8),
    "w": (lambda x: x + x + 1, lambda n: n + n + 1, lambda n, odd: torch.where(odd, -1.0, 1.0), 8),
}


def _chebyshev(kind: str, shifted: bool):
    first, at_one, at_minus_one, trig_from = _KINDS[kind]

    def decomposition(x, n):
        x, n = _operands(x, n)
        dtype = x.dtype
        # The shifted polynomial is the plain one at 2x - 1 (ATen's recurrence and
        # special cases are the plain ones' in x + x - 1).
        y = x + x - 1 if shifted else x
        odd = torch.remainder(n, 2) == 1
        value = _recurrence(y, n, first(y), y + y)
        y64 = y.to(torch.float64)
        closed = _closed(kind, y64, n).to(dtype)
        trig = (torch.abs(y) < 1) & (n > trig_from)
        value = torch.where(trig | (n > _UNROLLED), closed, value)
        one = at_one(n)
        value = torch.where(y == 1, one.to(dtype) if isinstance(one, torch.Tensor) else one, value)
        value = torch.where(y == -1, at_minus_one(n, odd).to(dtype), value)
        return torch.where(n < 0, torch.zeros((), dtype=dtype, device=x.device), value)

    return decomposition


POLYNOMIALS = {
    f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}": _chebyshev(kind, shifted)
    for kind in _KINDS for shifted in (False, True)
}
