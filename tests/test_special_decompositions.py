"""The special functions and Chebyshev polynomials decomposed for code generators with no
code for them (eagerc/compile/accelerator_special.py, accelerator_polynomials.py):
against ATen's kernels on OpInfo samples (float32, float64) and on edge values (0,
negative, large, the infinities, NaN); on the eagerc device over GPU memory with aliases
off (slow, CUDA only), each compiles and matches."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from eagerc.compile.accelerator_special import special_for
from eagerc.testing import assert_close

TRITON = special_for("triton")
aten = torch.ops.aten

UNARY = ["special_ndtri", "special_modified_bessel_k0", "special_modified_bessel_k1",
         "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1"]
POLYNOMIALS = [f"special_{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw"]
OPINFO = {name: name.replace("special_", "special.", 1) for name in UNARY + POLYNOMIALS + ["special_zeta"]}
OPINFO["polygamma"] = "polygamma"
OPINFO["special_airy_ai"] = "special.airy_ai"


def test_only_code_generators_without_them_decompose():
    assert special_for("cpp") == {}
    for name in [*OPINFO, "special_ndtr", "special_log_ndtr", "special_spherical_bessel_j0"]:
        packet = getattr(aten, name)
        assert packet.default in TRITON, name
        assert all(getattr(packet, o) in TRITON for o in packet.overloads()), name


def _reached(info, sample):
    seen = []

    class Record(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in TRITON and not seen:
                seen.append((func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    with Record():
        info.op(sample.input, *sample.args, **sample.kwargs)
    return seen[0] if seen else None


@pytest.mark.parametrize("name", sorted(OPINFO))
def test_matches_eager_on_opinfo_samples(name):
    from torch.testing._internal.common_methods_invocations import op_db

    checked = 0
    for info in (o for o in op_db if o.name == OPINFO[name]):
        for dtype in (torch.float32, torch.float64):
            for sample in info.sample_inputs("cpu", dtype):
                call = _reached(info, sample)
                if call is None:
                    continue
                func, args, kwargs = call
                expected, actual = func(*args, **kwargs), TRITON[func](*args, **kwargs)
                assert actual.dtype == expected.dtype and actual.shape == expected.shape
                assert_close(actual, expected, equal_nan=True)
                checked += 1
    assert checked >= 3, checked


EDGES = [0.0, -0.0, -1.0, -2.5, -40.0, 1e-30, 1e-6, 0.3, 0.5, 1.0, 1.5, 2.0, 2.5, 7.0, 30.0, 120.0,
         700.0, 1e30, float("inf"), -float("inf"), float("nan")]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_edge_values(name, dtype):
    x = torch.tensor(EDGES + [1e-10, 1e-3, 0.02, 0.999, 1 - 1e-7, 0.9999999999], dtype=dtype)
    op = getattr(aten, name).default
    assert_close(TRITON[op](x), op(x), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_airy_ai_edges(dtype):
    # Each form and its borders: the series on [-7, 2), the decaying form above (0 past
    # float64's underflow), the oscillating one below; NaN at the infinities. (Far left,
    # ATen's float32 phase drifts from the function: -1e4 is 10% off, not compared.)
    x = torch.tensor([0.0, -0.0, 1.0, 1.99, 2.0, 2.01, 5.0, 30.0, 105.0, -2.0, -3.3, -6.99, -7.0,
                      -7.01, -12.0, float("inf"), -float("inf"), float("nan")], dtype=dtype)
    op = aten.special_airy_ai.default
    assert_close(TRITON[op](x), op(x), equal_nan=True)


def test_airy_ai_where_atens_float64_is_off():
    # On (-2.56, -2.09) ATen's float64 airy_ai is up to 1e-5 off the function (its
    # float32 stays within float32's tolerance): checked against mpmath there.
    mpmath = pytest.importorskip("mpmath")
    x = torch.tensor([-2.09, -2.2, -2.338, -2.5], dtype=torch.float64)
    exact = torch.tensor([float(mpmath.airyai(v)) for v in x.tolist()], dtype=torch.float64)
    assert_close(TRITON[aten.special_airy_ai.default](x), exact, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polynomial_degrees_and_edges(name, dtype):
    """Every degree through the unrolled bound and past it (the closed form), at the
    closed values x = +-1 (shifted: 1, 0), inside and outside [-1, 1], negative and NaN
    degrees, a Scalar x or n."""
    op = getattr(aten, name)
    x = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 0.97, 1.02, -1.1, 0.25, 0.75, 1.3, -3.0, float("nan")], dtype=dtype)
    n = torch.tensor([-1.0, -0.5, float("nan"), *range(0, 20), 24.0, 30.7], dtype=dtype)
    xs, ns = torch.broadcast_tensors(x[:, None], n[None, :])
    expected, actual = op.default(xs, ns), TRITON[op.default](xs, ns)
    # Degrees up to 30 outside [-1, 1]: eager's recurrence and the closed form round
    # differently; both are within a few ulps of each other relative to the value.
    assert_close(actual, expected, equal_nan=True, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-5)
    # (A NaN x is left out with a Scalar n: ATen's CPU kernel returned a neighbour's value.)
    assert_close(TRITON[op.n_scalar](x[:-1], 5), op.n_scalar(x[:-1], 5), equal_nan=True)
    assert_close(TRITON[op.x_scalar](0.25, n), op.x_scalar(0.25, n), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_and_polygamma_edges(dtype):
    x = torch.tensor([1.0, 0.5, 2.0, 2.0, 3.0, 2.5, 4.0, 2.0, 60.0, 2.0, float("nan"), float("inf"), 2.0], dtype=dtype)
    q = torch.tensor([1.0, 1.0, 0.0, -2.0, -2.5, -2.5, 1e-3, 1e6, 1.5, 30.0, 1.0, 2.0, float("inf")], dtype=dtype)
    op = aten.special_zeta.default
    assert_close(TRITON[op](x, q), op(x, q), equal_nan=True)
    v = torch.tensor([0.1, 1.0, 3.7, -0.5, -2.25, 25.0, 1e4], dtype=dtype)
    for n in range(5):
        assert_close(TRITON[aten.polygamma.default](n, v), aten.polygamma.default(n, v), equal_nan=True)


_ON_GPU = textwrap.dedent("""
    import sys, torch, eagerc
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    names = sys.argv[1].split(",")
    for info in (o for o in op_db if o.name in names):
        for sample in list(info.sample_inputs("cpu", torch.float32))[:2]:
            d = lambda v: v.to("eagerc") if isinstance(v, torch.Tensor) else v
            expected = info.op(sample.input, *sample.args, **sample.kwargs)
            actual = info.op(d(sample.input), *[d(a) for a in sample.args], **{k: d(v) for k, v in sample.kwargs.items()})
            assert actual.device.type == "eagerc"
            assert_close(actual.cpu(), expected, equal_nan=True)
    ops = eagerc.stats()["ops"]
    bad = {k: v["fallback_reasons"] for k, v in ops.items() if v["fallbacks"] or v["aliased"]}
    assert not bad, bad
    print("OK")
""")


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the decompositions apply to Triton (CUDA)")
def test_compiled_on_gpu_memory_without_aliases():
    names = [OPINFO[n] for n in sorted(OPINFO)]
    env = dict(os.environ, EAGERC_BACKING="cuda", EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now")
    env.pop("EAGERC_CPU_FALLBACK", None)
    proc = subprocess.run([sys.executable, "-c", _ON_GPU, ",".join(names)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
