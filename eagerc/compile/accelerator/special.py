"""Special functions as pointwise code over functions every code generator has, for the
code generators Inductor gives no implementation of them (its pointwise_overrides_data
names none: Triton has no ndtr, ndtri, log_ndtr, spherical_bessel_j0, modified_bessel_k0/
k1 and their scaled forms, zeta, polygamma, nor the orthogonal polynomials).

Each follows ATen's special cases (its values at 0, the poles, the infinities, NaN) and
computes the function from its mathematics; the harder ones in float64 and rounded to the
input's dtype once, so float32 results are the correctly rounded values ATen's float32
code approximates.
"""
from __future__ import annotations

import math

import torch

aten = torch.ops.aten

_SQRT1_2 = 0.7071067811865476
_EULER = 0.5772156649015329


def _floating(x):
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def floating_operands(a, b, broadcast: bool = False):
    """A binary special function's operands as ATen's TensorIterator sees them: both
    Tensors (a Scalar as a 0-dim one, through full(): no constant tensor in a traced
    graph) cast to their common dtype, the default float dtype where that is an integer
    or bool one; broadcast to one shape if asked."""
    ref = a if isinstance(a, torch.Tensor) else b
    dtype = torch.result_type(a, b)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    a, b = (v.to(dtype) if isinstance(v, torch.Tensor) else torch.full((), v, dtype=dtype, device=ref.device)
            for v in (a, b))
    return torch.broadcast_tensors(a, b) if broadcast else (a, b)


def _ndtr(x):
    # ATen's calc_ndtr: erf near zero, erfc in the tails (no cancellation there).
    x = _floating(x)
    t = x * _SQRT1_2
    tail = 0.5 * torch.erfc(torch.abs(t))
    return torch.where(torch.abs(t) < _SQRT1_2, 0.5 + 0.5 * torch.erf(t),
                       torch.where(t > 0, 1 - tail, tail))


def _log_ndtr(x):
    # ATen's calc_log_ndtr: through erfcx below -1, where log(ndtr) would underflow.
    x = _floating(x)
    t = x * _SQRT1_2
    return torch.where(x < -1, torch.log(torch.special.erfcx(-t) / 2) - t * t,
                       torch.log1p(-torch.erfc(t) / 2))


def _spherical_bessel_j0(x):
    # ATen's spherical_bessel_j0_forward: its Taylor series below 0.5, sin(x)/x above,
    # 0 at the infinities.
    x = _floating(x)
    x2 = x * x
    series = 1 + x2 * (-1 / 6 + x2 * (1 / 120 + x2 * (-1 / 5040 + x2 * (
        1 / 362880 + x2 * (-1 / 39916800 + x2 * (1 / 6227020800))))))
    return torch.where(torch.isinf(x), torch.zeros_like(x),
                       torch.where(torch.abs(x) < 0.5, series, torch.sin(x) / x))


def _ndtri(p):
    # The inverse of ndtr by Newton's method on log(ndtr(x)) = log(q) for the lower half
    # q = min(p, 1 - p) (log space: relative accuracy deep in the tail), from erfinv's
    # value (or the tail's asymptote where 2q - 1 has lost q); float64 throughout.
    # ATen: -inf at 0, inf at 1, NaN outside [0, 1].
    p = _floating(p)
    q64 = p.to(torch.float64)
    upper = q64 > 0.5
    q = torch.where(upper, 1 - q64, q64).clamp(min=1e-300)
    log_q = torch.log(q)
    tail = -torch.sqrt(torch.clamp(-2 * log_q - torch.log(torch.clamp(-2 * log_q, min=1.0)) - math.log(2 * math.pi), min=0.0))
    x = torch.where(q > 1e-10, math.sqrt(2) * torch.erfinv(2 * q - 1), tail)
    for _ in range(5):
        log_phi = -0.5 * x * x - 0.5 * math.log(2 * math.pi)
        x = x - (_log_ndtr(x) - log_q) * torch.exp(_log_ndtr(x) - log_phi)
    x = torch.where(upper, -x, x)
    x = torch.where(q64 == 0, -math.inf, torch.where(q64 == 1, math.inf, x))
    x = torch.where((q64 < 0) | (q64 > 1) | torch.isnan(q64), math.nan, x)
    return x.to(p.dtype)


_K_SERIES_TERMS = 16
_K_NODES = 41
_K_STEP = 0.25


def _scaled_k(x, order: float):
    """exp(x) K_order(x) for x >= 2 (any real order), float64: the trapezoid rule on
    exp(-x (cosh t - 1)) cosh(order t) over t >= 0, in u = t sqrt(x) (a bell of width ~1
    for every x), where it converges geometrically; cosh t - 1 as 2 sinh(t/2)^2 (no
    cancellation for the small t of large x)."""
    root = torch.sqrt(x)
    total = torch.zeros_like(x)
    for j in range(_K_NODES):
        t = (j * _K_STEP) / root
        weight = 0.5 if j == 0 else 1.0
        term = torch.exp(-2 * x * torch.sinh(t / 2) ** 2)
        if order:
            term = term * torch.cosh(order * t)
        total = total + weight * term
    return total * (_K_STEP / root)


def _k_series(x, order: int):
    """K_order(x) for 0 < x <= 2 from its power series about 0, float64."""
    y = x * x / 4
    log_half = torch.log(x / 2)
    term = torch.ones_like(x)  # y^k / (k! (k + order)!)
    harmonic = 0.0  # H_k
    i_sum = torch.zeros_like(x)
    k_sum = torch.zeros_like(x)
    for k in range(_K_SERIES_TERMS):
        if k:
            harmonic += 1.0 / k
            term = term * y / (k * (k + order))
        i_sum = i_sum + term
        if order == 0:
            k_sum = k_sum + term * harmonic
        else:  # psi(k + 1) + psi(k + 2) = -2 gamma + 2 H_k + 1 / (k + 1)
            k_sum = k_sum + term * (-2 * _EULER + 2 * harmonic + 1.0 / (k + 1))
    if order == 0:
        return -(log_half + _EULER) * i_sum + k_sum
    return 1 / x + log_half * (x / 2) * i_sum - (x / 4) * k_sum


def _bessel_k(order: int, scaled: bool):
    def decomposition(x):
        x = _floating(x)
        x64 = x.to(torch.float64)
        small = x64 <= 2
        near = torch.where(small, x64, 2.0)
        far = torch.where(small, 2.0, torch.where(torch.isinf(x64), 2.0, x64))
        at_small = _k_series(near, order)
        at_far = _scaled_k(far, order)
        if scaled:
            value = torch.where(small, at_small * torch.exp(near), at_far)
        else:
            value = torch.where(small, at_small, at_far * torch.exp(-far))
        value = torch.where(torch.isinf(x64) & (x64 > 0), 0.0, value)
        value = torch.where(x64 == 0, math.inf, value)
        value = torch.where((x64 < 0) | torch.isnan(x64), math.nan, value)
        return value.to(x.dtype)

    return decomposition


_AI0, _AIP0 = 0.355028053887817239, 0.258819403792806798  # Ai(0), -Ai'(0)
_AIRY_SERIES_TERMS = 30
_AIRY_ASYMPTOTIC_TERMS = 20
_AIRY_SERIES_FROM = -7.0  # below: the oscillating asymptotic form
_AIRY_ZERO_FROM = 103.892  # above: Ai underflows float64 (ATen returns 0)


def _airy_ai(x):
    """Ai(x), float64: its Maclaurin series Ai(0) f(x) + Ai'(0) g(x) on [-7, 2); above,
    sqrt(x/3)/pi K_{1/3}(zeta) with zeta = 2/3 x^{3/2} (the trapezoid rule of _scaled_k);
    below, the asymptotic expansion in 1/zeta of the oscillating form. ATen: NaN at the
    infinities and NaN."""
    x = _floating(x)
    x64 = x.to(torch.float64)
    finite = torch.isfinite(x64)
    mid = torch.where(finite & (x64 >= _AIRY_SERIES_FROM) & (x64 < 2), x64, 0.0)
    cube = mid * mid * mid
    a, b = torch.ones_like(mid), mid.clone()
    f, g = a.clone(), b.clone()
    for k in range(1, _AIRY_SERIES_TERMS):
        a = a * cube / ((3 * k - 1) * (3 * k))
        b = b * cube / ((3 * k) * (3 * k + 1))
        f, g = f + a, g + b
    series = _AI0 * f - _AIP0 * g
    right = torch.where(finite & (x64 >= 2), x64, 2.0)
    zeta = (2 / 3) * right * torch.sqrt(right)
    decaying = torch.sqrt(right / 3) / math.pi * torch.exp(-zeta) * _scaled_k(zeta, 1 / 3)
    left = torch.where(finite & (x64 < _AIRY_SERIES_FROM), -x64, -_AIRY_SERIES_FROM)
    zeta = (2 / 3) * left * torch.sqrt(left)
    even, odd = torch.zeros_like(left), torch.zeros_like(left)
    u, power = 1.0, torch.ones_like(left)
    for k in range(_AIRY_ASYMPTOTIC_TERMS):
        if k:
            u = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k)
            power = power / zeta
        sign = -1.0 if (k // 2) % 2 else 1.0
        if k % 2:
            odd = odd + sign * u * power
        else:
            even = even + sign * u * power
    phase = zeta - math.pi / 4
    oscillating = (torch.cos(phase) * even + torch.sin(phase) * odd) / (math.sqrt(math.pi) * torch.sqrt(torch.sqrt(left)))
    value = torch.where(x64 >= 2, decaying, torch.where(x64 < _AIRY_SERIES_FROM, oscillating, series))
    value = torch.where(x64 > _AIRY_ZERO_FROM, 0.0, value)
    return torch.where(finite, value, math.nan).to(x.dtype)


# (2k)! / B_2k for k = 1..12: the Euler-Maclaurin remainder's coefficients.
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
        -174611 / 330, 854513 / 138, -236364091 / 2730]
_EM_DIVISORS = [math.factorial(2 * k + 2) / b for k, b in enumerate(_B2K)]
_ZETA_SHIFT = 32  # explicit terms at most: exact for q >= 10 - _ZETA_SHIFT


def _hurwitz_zeta(x, q):
    """zeta(x, q) = sum over k >= 0 of (q + k)^-x, float64: the terms while q + k < 10,
    then the Euler-Maclaurin remainder at w = q + k. ATen: inf at x == 1 and at the
    non-positive integers q, NaN for x < 1 and for q <= 0 with a non-integer x."""
    count = torch.clamp(torch.ceil(10 - q), 0, _ZETA_SHIFT)
    total = torch.zeros_like(x + q)
    for k in range(_ZETA_SHIFT):
        base = q + k
        total = total + torch.where(k < count, torch.pow(base, -x), 0.0)
    w = q + count
    b = torch.pow(w, -x)
    total = total + w * b / (x - 1) + 0.5 * b
    rising = torch.ones_like(total)  # x (x + 1) ... (x + 2k), over w^(2k+1)
    inv_w = 1 / w
    power = b * inv_w
    for k, divisor in enumerate(_EM_DIVISORS):
        rising = rising * (x + 2 * k) if k == 0 else rising * (x + 2 * k - 1) * (x + 2 * k)
        total = total + rising * power / divisor
        power = power * inv_w * inv_w
    pole = (q <= 0) & (q == torch.floor(q))
    total = torch.where(pole, math.inf, total)
    total = torch.where((q <= 0) & ~pole & (x != torch.floor(x)), math.nan, total)
    total = torch.where(x == 1, math.inf, torch.where(x < 1, math.nan, total))
    return total


def _zeta(x, q):
    x, q = floating_operands(x, q)
    return _hurwitz_zeta(x.to(torch.float64), q.to(torch.float64)).to(x.dtype)


def _trigamma(x):
    # ATen's trigamma, in the input's dtype as ATen computes it (below 1/2 its reflection
    # pi^2 / sin(pi x)^2 carries the rounding of pi x, which float32 callers see): six
    # terms of the series, then the asymptotic expansion.
    sign = torch.where(x < 0.5, -1.0, 1.0).to(x.dtype)
    sin_pi_x = torch.sin(x * math.pi)  # pi rounded to x's dtype, as ATen's PI
    result = torch.where(x < 0.5, -(math.pi ** 2) / (sin_pi_x * sin_pi_x), 0.0).to(x.dtype)
    x = torch.where(x < 0.5, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / x
    return sign * result


def _polygamma(n, x):
    # ATen: digamma for n = 0, trigamma for 1, else (-1)^(n+1) n! zeta(n + 1, x).
    x = _floating(x)
    if n == 0:
        return torch.digamma(x)
    if n == 1:
        return _trigamma(x)
    value = _hurwitz_zeta(torch.full((), n + 1.0, dtype=torch.float64, device=x.device), x.to(torch.float64))
    return ((1.0 if n % 2 else -1.0) * math.factorial(n) * value).to(x.dtype)


def table() -> dict:
    """The special functions here by Inductor's name for each (its pointwise_overrides_data
    keys); decompositions.special_for picks those a code generator lacks."""
    return {"ndtr": _ndtr, "log_ndtr": _log_ndtr, "spherical_bessel_j0": _spherical_bessel_j0,
            "ndtri": _ndtri, "modified_bessel_k0": _bessel_k(0, False),
            "modified_bessel_k1": _bessel_k(1, False), "scaled_modified_bessel_k0": _bessel_k(0, True),
            "scaled_modified_bessel_k1": _bessel_k(1, True), "zeta": _zeta, "polygamma": _polygamma, "airy_ai": _airy_ai}
