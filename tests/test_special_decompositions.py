"""The special functions and Chebyshev polynomials decomposed for code generators with no
code for them (eagerc/compile/accelerator/special.py, accelerator_polynomials.py):
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

from eagerc import codegen
from eagerc.compile.accelerator.decompositions import special_for
from eagerc.testing import assert_close

TRITON = special_for(codegen.TRITON)
aten = torch.ops.aten

UNARY = ["special_ndtri", "special_modified_bessel_k0", "special_modified_bessel_k1",
         "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1"]
POLYNOMIALS = [f"special_{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw"]
RECURRENCES = ["special_hermite_polynomial_h", "special_hermite_polynomial_he", "special_laguerre_polynomial_l",
               "special_legendre_polynomial_p"]
OPINFO = {name: name.replace("special_", "special.", 1) for name in UNARY + POLYNOMIALS + RECURRENCES + ["special_zeta"]}
OPINFO["polygamma"] = "polygamma"
OPINFO["special_airy_ai"] = "special.airy_ai"


def test_only_code_generators_without_them_decompose():
    assert special_for(codegen.CPP) == {}
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


def _same(actual, expected):
    return bool(((actual == expected) | (actual.isnan() & expected.isnan())).all())


@pytest.mark.parametrize("name", RECURRENCES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_recurrence_polynomials_every_degree(name, dtype):
    """Hermite, Laguerre, Legendre at degrees through 1000 (past Hermite's limit: NaN),
    at Legendre's +-1 and Laguerre's 0, inside and outside [-1, 1] (overflow to NaN ends
    the loop as it ends ATen's), negative, fractional, NaN, infinite and out-of-int64
    degrees, int64 degrees, Scalar x or n, the out= form. float32 is ATen's value bit for
    bit (its contracted multiply-subtract reproduced)."""
    op = getattr(aten, name)
    x = torch.tensor([-1.0, 1.0, 0.0, -0.0, 0.5, -0.3, 0.97, 1.02, -1.1, 1e-3, 1.3, -3.0, 7.0, -12.0], dtype=dtype)
    n = torch.tensor([-1.0, -0.5, -0.0, float("nan"), float("inf"), -float("inf"), 1e30, *range(0, 20), 24.0, 30.7,
                      127.0, 128.0, 129.0, 511.0, 512.0, 513.0, 1000.0], dtype=dtype)
    xs, ns = torch.broadcast_tensors(x[:, None], n[None, :])
    expected, actual = op.default(xs, ns), TRITON[op.default](xs, ns)
    assert actual.dtype == dtype
    if dtype == torch.float32:
        assert _same(actual, expected), (actual - expected).abs().nan_to_num().max()
    assert_close(actual, expected, equal_nan=True)
    degrees = torch.tensor([-3, 0, 1, 2, 7, 40], dtype=torch.int64)
    assert_close(TRITON[op.default](x[:, None], degrees), op.default(x[:, None], degrees), equal_nan=True)
    assert_close(TRITON[op.n_scalar](x, 5), op.n_scalar(x, 5), equal_nan=True)
    assert_close(TRITON[op.x_scalar](0.25, n), op.x_scalar(0.25, n), equal_nan=True)
    out = torch.empty(0, dtype=dtype)
    TRITON[op.out](xs, ns, out=out)
    assert_close(out, expected, equal_nan=True)
    # ATen's value at a NaN x: Hermite's recurrence gives NaN; Laguerre's and Legendre's
    # loop never starts and returns an uninitialized variable (not compared). Here NaN.
    nan = torch.tensor([float("nan")], dtype=dtype)
    assert TRITON[op.n_scalar](nan, 3).isnan().all()


def test_recurrence_loops_stop_where_atens_do():
    """Past Hermite's degree limit no step is taken; outside [-1, 1] Legendre and Laguerre
    overflow to NaN, which ends ATen's loop and this one: degree 10^9 answers at once.
    Elements at their closed values take no steps either."""
    big = torch.tensor([1e9], dtype=torch.float64)
    for name, x in (("special_hermite_polynomial_h", 0.5), ("special_legendre_polynomial_p", 3.0),
                    ("special_laguerre_polynomial_l", -40.0), ("special_legendre_polynomial_p", -1.0),
                    ("special_laguerre_polynomial_l", 0.0)):
        op = getattr(aten, name).default
        xs = torch.tensor([x], dtype=torch.float64)
        assert _same(TRITON[op](xs, big), op(xs, big)), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_and_polygamma_edges(dtype):
    x = torch.tensor([1.0, 0.5, 2.0, 2.0, 3.0, 2.5, 4.0, 2.0, 60.0, 2.0, float("nan"), float("inf"), 2.0], dtype=dtype)
    q = torch.tensor([1.0, 1.0, 0.0, -2.0, -2.5, -2.5, 1e-3, 1e6, 1.5, 30.0, 1.0, 2.0, float("inf")], dtype=dtype)
    op = aten.special_zeta.default
    assert_close(TRITON[op](x, q), op(x, q), equal_nan=True)
    v = torch.tensor([0.1, 1.0, 3.7, -0.5, -2.25, 25.0, 1e4], dtype=dtype)
    for n in range(5):
        assert_close(TRITON[aten.polygamma.default](n, v), aten.polygamma.default(n, v), equal_nan=True)


_ON_HOST_CPP = textwrap.dedent("""
    import sys, torch, eagerc
    import eagerc.compile.accelerator.decompositions as decompositions
    from eagerc.codegen import TRITON
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    used = set()
    def counted(op, fn):
        def decomposition(*args, **kwargs):
            used.add(op.name())
            return fn(*args, **kwargs)
        return decomposition
    triton = {op: counted(op, fn) for op, fn in decompositions.special_for(TRITON).items()}
    decompositions.special_for = lambda codegen: triton  # host C++ traces Triton's table
    d = lambda v: v.to("eagerc") if isinstance(v, torch.Tensor) else v
    import time
    names = sys.argv[1].split(",")
    for info in (o for o in op_db if o.name in names):
        start = time.perf_counter()
        for sample in list(info.sample_inputs("cpu", torch.float32))[:2]:
            expected = info.op(sample.input, *sample.args, **sample.kwargs)
            actual = info.op(d(sample.input), *[d(a) for a in sample.args], **sample.kwargs)
            assert actual.device.type == "eagerc"
            assert_close(actual.cpu(), expected, equal_nan=True)
        op = getattr(torch.ops.aten, info.name.replace(".", "_"))
        x = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 1.02, -1.1, 1.3, -3.0, 7.0])
        n = torch.tensor([-1.0, -0.5, float("nan"), float("inf"), *range(0, 12), 30.7, 130.0, 700.0])
        xs, ns = (t.contiguous() for t in torch.broadcast_tensors(x[:, None], n[None, :]))
        expected, actual = op.default(xs, ns), op.default(d(xs), d(ns)).cpu()
        assert bool(((actual == expected) | (actual.isnan() & expected.isnan())).all()), info.name
        assert_close(op.n_scalar(d(x), 5).cpu(), op.n_scalar(x, 5), equal_nan=True)
        assert_close(op.x_scalar(0.25, d(n)).cpu(), op.x_scalar(0.25, n), equal_nan=True)
    ops = {k: v for k, v in eagerc.stats()["ops"].items() if "polynomial" in k}
    assert all(v["compiles"] and not (v["fallbacks"] or v["aliased"] or v["host_round_trips"])
               for v in ops.values()), ops
    assert len(used) == 3 * len(names), used
    print("OK")
""")


@pytest.mark.slow
def test_recurrences_compile_through_host_cpp(tmp_path):
    """The while_loop recurrences lower through Inductor's C++ code generator too: on the
    eagerc device over host memory with aliases off, each traced with Triton's table (a
    fresh cache: these kernels must not serve the host's own namespace), compiles, and
    matches eager (float32 bit for bit on the edge grid)."""
    names = [OPINFO[n] for n in RECURRENCES]
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_CPU_FALLBACK="0", EAGERC_COMPILE="now",
               EAGERC_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _ON_HOST_CPP, ",".join(names)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


_ON_GPU = textwrap.dedent("""
    import sys, torch, eagerc
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    import time
    names = sys.argv[1].split(",")
    for info in (o for o in op_db if o.name in names):
        start = time.perf_counter()
        for sample in list(info.sample_inputs("cpu", torch.float32))[:2]:
            d = lambda v: v.to("eagerc") if isinstance(v, torch.Tensor) else v
            expected = info.op(sample.input, *sample.args, **sample.kwargs)
            actual = info.op(d(sample.input), *[d(a) for a in sample.args], **{k: d(v) for k, v in sample.kwargs.items()})
            assert actual.device.type == "eagerc"
            assert_close(actual.cpu(), expected, equal_nan=True)
        print(f"{info.name}: {time.perf_counter() - start:.1f} s")
    ops = eagerc.stats()["ops"]
    bad = {k: v["fallback_reasons"] for k, v in ops.items() if v["fallbacks"] or v["aliased"]}
    assert not bad, bad
    print("OK")
""")


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the decompositions apply to Triton (CUDA)")
def test_compiled_on_gpu_memory_without_aliases():
    # Each compile is a Triton build of a long float64 kernel (the series, the unrolled
    # recurrences): one after another in one process they took over 300 s on an H100
    # machine. The ops are split over processes that compile side by side, one op each
    # where there are cores enough, every op and sample as before.
    _run_on_gpu_memory([OPINFO[n] for n in sorted(OPINFO) if n not in RECURRENCES])


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the decompositions apply to Triton (CUDA)")
def test_recurrences_on_gpu_memory_equal_eager():
    # The recurrences' while_loop compiles to a GPU C++ wrapper that loops on the host and
    # launches Triton kernels (torch 2.11's wrapper declared the stream twice in the loop;
    # eagerc/codegen/triton/stream_declarations.py): no alias and no host round trip.
    _run_on_gpu_memory([OPINFO[n] for n in RECURRENCES])


def _run_on_gpu_memory(names):
    env = dict(os.environ, EAGERC_BACKING="cuda", EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now")
    env.pop("EAGERC_CPU_FALLBACK", None)
    workers = max(1, min(len(names), os.cpu_count() or 2))
    procs = [subprocess.Popen([sys.executable, "-c", _ON_GPU, ",".join(names[i::workers])], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(workers)]
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0 and "OK" in out, out[-2000:] + err[-4000:]
