"""The orthogonal polynomials, for code generators with no implementation of them
(Triton): Chebyshev T, U, V, W and the shifted four as pointwise code; Hermite H and He,
Laguerre L and Legendre P as ATen's recurrence in a loop.

ATen evaluates P_n(x) at each element's own degree n (a float tensor truncated to an
integer) by the three-term recurrence, after its special cases: 0 for n < 0, the closed
values at x = +-1, and for |x| < 1 beyond a small degree the trigonometric form. Here
the recurrence is unrolled to degree _UNROLLED with each element picking the step equal to
its degree (torch.where); past that degree every element takes the closed form, which
holds for every degree: cos/sin of (n + c) acos(x) inside [-1, 1], cosh/sinh of
(n + c) acosh(|x|) outside it (float64, rounded once; where ATen's float32 recurrence
overflows to inf - inf = NaN this gives the infinity).

Hermite, Laguerre and Legendre have no closed form to take past an unrolled degree (nor
an expansion accurate at every degree), so ATen's recurrence itself runs, rounded as
ATen's is (_fms), to each element's own degree, in a while_loop (torch's higher-order
op; Inductor lowers it to a loop in the wrapper around one generated kernel per
iteration). Each iteration takes _STEPS pointwise steps, an element stepping while the
step's k is below its degree; the loop goes on while any element has steps left and a
value that is not NaN (ATen's own stop for Laguerre and Legendre; a NaN stays NaN through
every recurrence, so it ends Hermite's too). ATen's special cases come first: 0 for
n < 0, P_0 = 1, Legendre's +-1 at x = +-1, Laguerre's 1 at x = 0, Hermite's NaN past its
degree limit (128 for float32, 512 for float64); those elements take no steps. A degree
of 10^9 inside [-1, 1] loops as long as ATen does, in kernels of _STEPS steps. At a NaN x
of degree >= 2 ATen's Laguerre and Legendre return an uninitialized variable; here NaN.
"""
from __future__ import annotations

import math

import torch

from eagerc.compile.accelerator.special import floating_operands

_UNROLLED = 16
_STEPS = 16  # recurrence steps per loop iteration (one kernel)


def _degree(n):
    """ATen's static_cast<int64_t>(n) of a floating degree, as float64: truncation; NaN,
    the infinities and magnitudes of 2^63 and more land on INT64_MIN (x86), a negative
    degree."""
    n = torch.trunc(n.to(torch.float64))
    return torch.where(torch.isnan(n) | (torch.abs(n) >= 2.0 ** 63), -1.0, n)


def _operands(x, n, contiguous=False):
    x, n = floating_operands(x, n, broadcast=True)
    if contiguous:
        x, n = x.contiguous(), n.contiguous()
    return x, _degree(n)


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


def _loop(n, first, step):
    """Per element, q after ATen's `for (k = 1; k < n && !isnan(q); k++) { r = step(k, p,
    q); p = q; q = r; }` from p = 1, q = first; k is an int64 0-dim tensor, so step's
    integer coefficients meet x in x's dtype as ATen's int64 k does."""
    from torch._higher_order_ops.while_loop import while_loop

    def more(k, p, q):
        return ((k < n) & ~torch.isnan(q)).any()

    def steps(k, p, q):
        for j in range(_STEPS):
            kj = k + j
            go = kj < n
            r = step(kj, p, q)
            p, q = torch.where(go, q, p), torch.where(go, r, q)
        return k + _STEPS, p, q

    # Carried values contiguous (a broadcast operand's zero strides are not what a step
    # returns, and while_loop wants the same layout in and out).
    first = first.clone(memory_format=torch.contiguous_format)
    k = torch.ones((), dtype=torch.int64, device=first.device)
    return while_loop(more, steps, (k, torch.ones_like(first), first))[2]


def _fms(a, q, c, p):
    """a q - c p as ATen's CPU build computes it: contracted to fma(a, q, -(c p)), the
    product a q unrounded (exact in float64 for float32 operands; float64 itself is left
    to the code generator) and c p rounded in the dtype."""
    cp = c * p
    if q.dtype == torch.float64:
        return a * q - cp
    return (a.to(torch.float64) * q.to(torch.float64) - cp.to(torch.float64)).to(q.dtype)


_HERMITE_LIMIT = {torch.float32: 128, torch.float64: 512}  # ATen's getHermitianLimit


def _hermite(physicists: bool):
    def decomposition(x, n):
        x, n = _operands(x, n, contiguous=True)
        limit = _HERMITE_LIMIT.get(x.dtype, 1024)
        if physicists:  # H_{k+1} = 2x H_k - 2k H_{k-1}
            first, step = x + x, lambda k, p, q: _fms(x + x, q, k + k, p)
        else:  # He_{k+1} = x He_k - k He_{k-1}
            first, step = x, lambda k, p, q: _fms(x, q, k, p)
        value = _loop(torch.where(n > limit, 0.0, n), first, step)
        value = torch.where(n == 0, 1.0, value)
        value = torch.where(n > limit, math.nan, value)
        return torch.where(n < 0, 0.0, value)

    return decomposition


def _laguerre(x, n):
    # (k + 1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1}, in ATen's order of operations.
    x, n = _operands(x, n, contiguous=True)
    at_zero = x == 0
    value = _loop(torch.where(at_zero, 0.0, n), 1 - x, lambda k, p, q: _fms((k + k) + (1 - x), q, k, p) / (k + 1))
    value = torch.where((n == 0) | at_zero, 1.0, value)
    return torch.where(n < 0, 0.0, value)


def _legendre(x, n):
    # (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}; P_n(1) = 1, P_n(-1) = (-1)^n.
    x, n = _operands(x, n, contiguous=True)
    at_one = torch.abs(x) == 1
    value = _loop(torch.where(at_one, 0.0, n), x, lambda k, p, q: _fms((k + k + 1) * x, q, k, p) / (k + 1))
    value = torch.where(n == 0, 1.0, value)
    sign = torch.where((x > 0) | (torch.remainder(n, 2) == 0), 1.0, -1.0).to(x.dtype)
    value = torch.where(at_one, sign, value)
    return torch.where(n < 0, 0.0, value)


POLYNOMIALS = {
    **{f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}": _chebyshev(kind, shifted)
       for kind in _KINDS for shifted in (False, True)},
    "hermite_polynomial_h": _hermite(True), "hermite_polynomial_he": _hermite(False),
    "laguerre_polynomial_l": _laguerre, "legendre_polynomial_p": _legendre,
}
