"""The accelerator decompositions (eagerc/compile/accelerator/decompositions.py): ops that
on host memory would run ATen's CPU kernel (as an extern or on aliases) trace into ops
eagerc compiles, on a device whose aliases are off as a vendor's accelerator's are.

Checked against native eager on OpInfo samples: the decompositions' math on CPU tensors
(fast), and the eagerc device with EAGERC_ALIAS_FALLBACK=0 in a subprocess per op family,
where each op must compile (no fallback, no aliases) and match (slow: each family
compiles a few kernels)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
from eagerc.testing import assert_close

# OpInfo entry -> the aten overloads its samples call (functional forms).
FAMILIES = {
    "cummax": ["cummax"], "cummin": ["cummin"], "logcumsumexp": ["logcumsumexp"],
    "median": ["median"], "nanmedian": ["nanmedian"], "kthvalue": ["kthvalue"],
    "histc": ["histc"], "histogram": ["histogram"], "bucketize": ["bucketize"], "isin": ["isin"], "take": ["take"],
    "histogramdd": ["_histogramdd_from_bin_tensors"],
}


def _samples(name: str, count: int):
    from torch.testing._internal.common_methods_invocations import op_db

    info = next(o for o in op_db if o.name == name and not o.variant_test_name)
    return info, list(info.sample_inputs("cpu", torch.float32))[:count]


def _overload_for(name: str, sample):
    """The decomposed overload the functional call of `name` on `sample` reaches."""
    seen = []

    class Record(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in ACCELERATOR_DECOMPOSITIONS and not seen:
                seen.append((func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    info, _ = _samples(name, 0)
    with Record():
        info.op(sample.input, *sample.args, **sample.kwargs)
    return seen[0] if seen else None


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_decomposition_matches_eager_on_opinfo_samples(name):
    """The decomposition itself, on CPU tensors, against ATen's kernel: values, dtypes,
    shapes (indices exactly)."""
    _, samples = _samples(name, 8)
    checked = 0
    for sample in samples:
        call = _overload_for(name, sample)
        if call is None:
            continue
        func, args, kwargs = call
        expected = func(*args, **kwargs)
        actual = ACCELERATOR_DECOMPOSITIONS[func](*args, **kwargs)
        assert_close(actual, expected, equal_nan=True)
        for a, e in zip(*(v if isinstance(v, tuple) else (v,) for v in (actual, expected))):
            assert (a.dtype, a.shape) == (e.dtype, e.shape), (func, a, e)
        checked += 1
    assert checked, f"no OpInfo sample of {name} reached a decomposed overload"


def test_scans_keep_atens_nan_and_tie_rules():
    x = torch.tensor([[1.0, 3.0, 3.0, float("nan"), 5.0, float("nan"), 0.0],
                      [-float("inf"), -float("inf"), 2.0, 2.0, 1.0, 2.0, float("inf")]])
    for op in (torch.ops.aten.cummax.default, torch.ops.aten.cummin.default):
        values, indices = ACCELERATOR_DECOMPOSITIONS[op](x, 1)
        ev, ei = op(x, 1)
        assert_close(values, ev, equal_nan=True)
        assert torch.equal(indices, ei), (op, indices, ei)
    both_inf = torch.tensor([float("inf"), float("inf"), -float("inf"), 1.0])
    assert_close(ACCELERATOR_DECOMPOSITIONS[torch.ops.aten.logcumsumexp.default](both_inf, 0),
                 torch.logcumsumexp(both_inf, 0), equal_nan=True)


def test_medians_pick_atens_element_for_nan_rows():
    # (Of a row of only NaNs ATen returns whichever NaN std::nth_element leaves at the
    # middle, an index it does not define: not compared.)
    x = torch.tensor([[2.0, float("nan"), 1.0, float("nan")], [float("nan"), 7.0, 5.0, 6.0],
                      [4.0, 1.0, 3.0, 2.0]])
    for op in (torch.ops.aten.median.dim, torch.ops.aten.nanmedian.dim):
        values, indices = ACCELERATOR_DECOMPOSITIONS[op](x, 1)
        ev, ei = op(x, 1)
        assert_close(values, ev, equal_nan=True)
        assert torch.equal(indices, ei), (op, indices, ei)


@pytest.mark.parametrize("name", ["special.ndtr", "special.log_ndtr", "special.spherical_bessel_j0"])
def test_special_functions_triton_has_no_code_for(name):
    """Triton's decompositions of the special functions Inductor gives it no code for,
    against eager on OpInfo samples (float32, float64, int64 promoted) and the branch
    edges; host C++ has code for every one and gets none."""
    from torch.testing._internal.common_methods_invocations import op_db

    from eagerc.codegen import CPP, TRITON
    from eagerc.compile.accelerator.decompositions import special_for

    assert special_for(CPP) == {}
    table = special_for(TRITON)
    op = getattr(torch.ops.aten, name.replace(".", "_")).default
    checked = 0
    for info in (o for o in op_db if o.name == name):
        for dtype in (torch.float32, torch.float64, torch.int64):
            for sample in list(info.sample_inputs("cpu", dtype))[:8]:
                expected, actual = op(sample.input), table[op](sample.input)
                assert_close(actual, expected, equal_nan=True)
                assert actual.dtype == expected.dtype
                checked += 1
    edges = torch.tensor([-40.0, -10, -1.5, -1, -0.3, 0, 0.3, 0.49, 0.5, 3, 10, 40,
                          float("inf"), -float("inf"), float("nan")])
    assert_close(table[op](edges), op(edges), equal_nan=True)
    assert checked


_ON_DEVICE = textwrap.dedent("""
    import sys, torch, eagerc
    from eagerc.testing import assert_close
    from torch.testing._internal.common_methods_invocations import op_db
    names, count = sys.argv[1].split(","), int(sys.argv[2])
    def dev(v):
        if isinstance(v, torch.Tensor):
            return v.to("eagerc")
        if isinstance(v, (list, tuple)):
            return type(v)(dev(x) for x in v)
        return v
    from torch.utils._python_dispatch import TorchDispatchMode
    from eagerc.compile.accelerator.decompositions import ACCELERATOR_DECOMPOSITIONS
    reached = set()
    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in ACCELERATOR_DECOMPOSITIONS:
                reached.add(func.name().replace("aten::", "").replace(".default", ""))
            return func(*args, **(kwargs or {}))
    for name in names:
        info = next(o for o in op_db if o.name == name and not o.variant_test_name)
        samples = list(info.sample_inputs("cpu", torch.float32))
        for sample in samples[:count] + [s for s in samples[count:] if name == "histogram"][:count]:
            before = len(reached)
            with Record():
                expected = info.op(sample.input, *sample.args, **sample.kwargs)
            if len(reached) == before and name == "histogram":
                continue  # a bin count: not decomposed (it runs on aliases)
            actual = info.op(dev(sample.input), *dev(sample.args), **dev(sample.kwargs))
            actual = tuple(actual) if isinstance(actual, tuple) else (actual,)
            expected = tuple(expected) if isinstance(expected, tuple) else (expected,)
            for a in actual:
                assert a.device.type == "eagerc", (name, a.device)
            assert_close(tuple(a.cpu() for a in actual), expected, equal_nan=True)
    ops = eagerc.stats()["ops"]
    mine = {k: v for k, v in ops.items() if k.split("::")[1].split("@")[0] in reached}
    for name in names:
        assert any(k.split("::")[1].startswith(name) and v["compiles"] + v["disk_loads"]
                   for k, v in mine.items()), (name, mine)
    assert not any(v["fallbacks"] or v["aliased"] for v in mine.values()), mine
    print("OK", sorted(k for k in ops if ops[k]["compiles"] + ops[k]["disk_loads"]))
""")


def _run_on_device(names: list, samples: int):
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now", OMP_NUM_THREADS="1")
    env["EAGERC_CPU_FALLBACK"] = "0"  # an op that cannot compile must raise here, not go to the host
    proc = subprocess.run([sys.executable, "-c", _ON_DEVICE, ",".join(names), str(samples)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("family", [["cummax", "cummin", "logcumsumexp"],
                                    ["median", "nanmedian", "kthvalue"],
                                    ["histc", "histogram", "bucketize", "isin", "take"]], ids=lambda f: f[0])
def test_compiled_on_a_device_without_aliases(family):
    """Each family compiles on the eagerc device with aliases off (a vendor's view), and
    every OpInfo sample matches native eager."""
    _run_on_device(family, 3)


def test_vendor_view_names_what_served_each_op():
    """--vendor's report: per record what served it, and what works without the host."""
    from eagerc.coverage import report_json, report_md
    from eagerc.coverage.classify import served_by

    results = {
        ("aten::abs", "float32"): {"status": "pass"},
        ("aten::cummax", "float32"): {"status": "pass"},
        ("aten::median", "float32"): {"status": "extern", "externs": ["aoti_torch_cpu_sort_stable"]},
        ("aten::nonzero", "float32"): {"status": "aliased"},
        ("aten::linalg_inv_ex", "float32"): {"status": "compile_error", "detail": "no lowering"},
        ("aten::view", "float32"): {"status": "runtime"},
        ("aten::bad", "float32"): {"status": "mismatch"},
        ("aten::sin", "float32"): {"status": "decomposed"},
    }
    results = {k: {"op": k[0], "dtype": k[1], **v} for k, v in results.items()}
    report = report_json.build(results, {}, device="eagerc", dtypes=["float32"], grad=False,
                               command=["x"], vendor=True)
    served = {op: e["results"]["float32"].get("served_by") for op, e in report["ops"].items()}
    assert served == {"aten::abs": "compiled", "aten::cummax": "decomposition", "aten::median": "extern",
                      "aten::nonzero": "host", "aten::linalg_inv_ex": "host", "aten::view": "runtime",
                      "aten::bad": "none", "aten::sin": None}
    summary = report["summary"]["float32"]
    assert summary["tested"] == 7 and summary["working"] == 5
    assert summary["working_without_host"] == 4  # abs, cummax, median, view; not nonzero
    assert summary["served_by"] == {"compiled": 1, "decomposition": 1, "extern": 1, "host": 2,
                                    "runtime": 1, "none": 1}
    text = report_md.render(report)
    assert "As a vendor's accelerator sees it" in text and "`aten::linalg_inv_ex`, `aten::nonzero`" in text
    # Without --vendor nothing changes: no served_by, no vendor table.
    plain = report_json.build(results, {}, device="eagerc", dtypes=["float32"], grad=False, command=["x"])
    assert "served_by" not in plain["summary"]["float32"] and not plain["vendor_view"]
    assert "vendor" not in report_md.render(plain)
    assert served_by("pass", "aten::cummax") == "compiled"  # not in this run's decomposed set


def test_only_a_device_without_native_kernels_uses_them(monkeypatch):
    """A new device with aliases off traces with the decompositions, and its cache
    namespace says so (kernels compiled either way never mix); CPU never does."""
    import eagerc  # noqa: F401 - registers the eagerc device
    from eagerc.kernel_key import CacheKey
    from eagerc.targets import for_device

    monkeypatch.setenv("EAGERC_ALIAS_FALLBACK", "1")
    device, cpu = for_device("eagerc"), for_device("cpu")
    assert device.native_kernels and cpu.native_kernels
    assert "accelerator_decompositions" not in CacheKey("op", device, "aten::cummax", b"").namespace_components()
    assert torch.ops.aten.cummax.default not in device.decompositions()
    monkeypatch.setenv("EAGERC_ALIAS_FALLBACK", "0")
    assert not device.native_kernels and cpu.native_kernels
    assert "accelerator_decompositions" in CacheKey("op", device, "aten::cummax", b"").namespace_components()
    assert device.decompositions()[torch.ops.aten.cummax.default] is \
        ACCELERATOR_DECOMPOSITIONS[torch.ops.aten.cummax.default]
    assert torch.ops.aten.cummax.default not in cpu.decompositions()


def test_scan_steps_force_no_symbolic_stride_order():
    """Each scan step is its own buffer, forced through a 1-d view: torch 2.11's Inductor
    sorts the strides given to force_stride_order, and symbolic ones (s0*s1 > 1) made the
    scans fail to lower on Triton."""
    from torch._inductor import inductor_prims
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(3, 5, 9)
    for op in (torch.ops.aten.cummax.default, torch.ops.aten.logcumsumexp.default):
        gm = make_fx(lambda t: ACCELERATOR_DECOMPOSITIONS[op](t, 1), tracing_mode="symbolic")(x)
        forced = [n for n in gm.graph.nodes if n.target is inductor_prims.force_stride_order]
        assert forced, op
        assert all(n.args[0].meta["val"].dim() == 1 and list(n.args[1]) == [1] for n in forced), op
        assert_close(gm(x), ACCELERATOR_DECOMPOSITIONS[op](x, 1), equal_nan=True)


_HISTOGRAMDD_ON_DEVICE = textwrap.dedent("""
    import torch, eagerc
    from eagerc.testing import assert_close
    op = torch.ops.aten._histogramdd_from_bin_tensors.default
    x, w = torch.randn(7, 5, 3), torch.rand(7, 5)
    bins = [torch.linspace(-1, 1, 4), torch.linspace(-2, 0, 3), torch.tensor([-1.0, 0.0, 0.5, 2.0])]
    d = lambda t: t.to("eagerc")
    for kwargs in ({}, {"density": True}, {"weight": w}):
        expected = op(x, bins, **kwargs)
        actual = op(d(x), [d(b) for b in bins], **{k: d(v) if isinstance(v, torch.Tensor) else v
                                                    for k, v in kwargs.items()})
        assert actual.device.type == "eagerc"
        assert_close(actual.cpu(), expected, equal_nan=True)
    entry = eagerc.stats()["ops"]["aten::_histogramdd_from_bin_tensors@PrivateUse1"]
    assert entry["compiles"] + entry["disk_loads"] and not entry["fallbacks"] and not entry["aliased"], entry
    print("OK")
""")


@pytest.mark.slow
def test_histogramdd_over_given_edges_compiles_without_aliases():
    """histogramdd's bin-edge form (a list of tensors) compiles on the device with aliases
    and the host round trip off (its OpInfo also reaches the bin-count forms, which do not)."""
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now", OMP_NUM_THREADS="1",
               EAGERC_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, "-c", _HISTOGRAMDD_ON_DEVICE], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


_HASH_ON_DEVICE = textwrap.dedent("""
    import torch, eagerc
    from torch.testing._internal.common_methods_invocations import op_db
    op = torch.ops.aten.hash_tensor.default
    info = next(o for o in op_db if o.name == "hash_tensor")
    bits = lambda t: t.view(torch.int64)
    for dtype in (torch.float32, torch.int64, torch.bool):
        for s in list(info.sample_inputs("cpu", dtype))[:8]:
            expected = op(s.input, *s.args, **s.kwargs)
            actual = op(s.input.to("eagerc"), *s.args, **s.kwargs)
            assert actual.device.type == "eagerc" and actual.dtype == expected.dtype == torch.uint64
            assert actual.shape == expected.shape and torch.equal(bits(actual.cpu()), bits(expected)), (s, actual)
    edges = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40])
    assert torch.equal(bits(op(edges.to("eagerc")).cpu()), bits(op(edges)))
    entry = eagerc.stats()["ops"]["aten::hash_tensor@PrivateUse1"]
    assert entry["compiles"] + entry["disk_loads"] and not entry["fallbacks"] and not entry["aliased"], entry
    print("OK")
""")


@pytest.mark.slow
def test_hash_tensor_compiles_without_aliases():
    """hash_tensor's xor of the elements' bits (prims.xor_sum, which only Inductor
    implements, so checked compiled) equals ATen's, bit for bit, with aliases and the host
    round trip off."""
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now", OMP_NUM_THREADS="1",
               EAGERC_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, "-c", _HASH_ON_DEVICE], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
