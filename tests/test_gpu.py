"""CUDA as a target (override mode): Triton kernels per op through the C++ holder.

Skipped where torch sees no CUDA GPU (CI); run on the GPU machine by tools/gpu_check.sh.
Counts, not seconds: one compile for many sizes, hits that never enter Python, a new
process that loads self-contained artifacts (no Inductor cache, no cubin files) and
compiles nothing, kernels ordered on the caller's current stream.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _C
from eagerc.testing import assert_close

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DEV = "cuda"


def op_stats(name):
    return eagerc.stats()["ops"].get(name, {"hits": 0, "misses": 0, "compiles": 0, "fallbacks": 0})


def test_cuda_is_a_target_with_its_arch():
    from eagerc import targets
    from eagerc.kernel_key import CacheKey

    t = targets.for_device("cuda")
    major, minor = torch.cuda.get_device_capability()
    assert (t.device, t.dispatch_key, t.home, t.codegen.name, t.host_aliases) == ("cuda", "CUDA", "cuda", "triton", False)
    assert t.arch().startswith(f"sm_{major}{minor}-cuda")
    assert "codegen.triton" in CacheKey("op", t, "aten::abs", b"").namespace_components()


def test_new_sizes_reuse_one_kernel_per_size_class(fresh_cache):
    # GPU tensors carry a size class (under 32K elements, under 4M, larger: csrc/signature.cpp),
    # so each class gets a kernel tuned in it; every other size is a hit.
    sizes = (2, 3, 5, 8, 13, 64, 300, 1024, 2900, 4099)  # classes s s s s s s m m l l
    inputs = [torch.randn(n, n + 3, device=DEV) for n in sizes]
    expected = [x.abs() for x in inputs]
    with eagerc.enabled(DEV, ops=["aten::abs"]):
        outputs = [torch.abs(x) for x in inputs]
    for y, want in zip(outputs, expected):
        assert y.device.type == DEV
        assert_close(y, want)
    s = op_stats("aten::abs@CUDA")
    assert s["compiles"] == 3 and s["fallbacks"] == 0
    assert s["hits"] == len(inputs) - 3


def test_triton_only_kernels_launch_from_a_plan(fresh_cache):
    # No per-op C++ for these (eagerc/codegen/triton/launch_plan.py): each compile is one plan,
    # Triton kernels and cuBLAS externs alike,
    # and the plan's guard and launches serve other sizes and alpha values exactly.
    from eagerc.codegen.triton import plan_build

    ops = ["aten::add.Tensor", "aten::_softmax", "aten::native_layer_norm", "aten::sum.dim_IntList",
           "aten::where.self", "aten::cumsum", "aten::mm", "aten::addmm"]
    calls = [lambda x, y: torch.add(x, y, alpha=0.5), lambda x, y: torch.softmax(x, 1),
             lambda x, y: F.layer_norm(x, (x.shape[1],)), lambda x, y: x.sum(1),
             lambda x, y: torch.where(x > y, x, y),
             lambda x, y: torch.cumsum(x.round(), 0),  # integers: exact in any summation order
             lambda x, y: torch.mm(x, y.t()),  # cuBLAS through the plan's extern step
             lambda x, y: torch.addmm(x[:, :3], x, y[:3].t(), beta=0.5, alpha=2.0)]
    for rows in (37, 5, 300):
        x, y = torch.randn(rows, 91, device=DEV), torch.randn(rows, 91, device=DEV)
        expected = [fn(x, y) for fn in calls]
        with eagerc.enabled(DEV, ops=ops):
            got = [fn(x, y) for fn in calls]
        for g, want in zip(got, expected):
            assert_close(g, want)
    compiles = eagerc.stats()["compiles"]
    assert compiles >= len(ops) and eagerc.stats()["fallbacks"] == 0
    # Every stored artifact (content-addressed: one file per distinct build) is a plan. Not
    # plan_build.counts: a wrapper another test process already built is not built again.
    # A record with no kernel stores no bytes (the empty file): layer_norm's float eps takes
    # no symbolic value, so its key records "specialize values" (eagerc/cache.py).
    artifacts = [a for a in fresh_cache.rglob("artifacts/*.so") if a.stat().st_size]
    assert len(artifacts) >= len(ops), artifacts
    assert all(plan_build.is_plan_artifact(a.read_bytes()) for a in artifacts), plan_build.reasons
    expected = torch.add(x, y, alpha=-0.25)
    with eagerc.enabled(DEV, ops=ops):
        got = torch.add(x, y, alpha=-0.25)
    assert_close(got, expected)
    assert eagerc.stats()["compiles"] == compiles  # alpha is a runtime input of the plan


def test_a_compile_leaves_the_seeded_random_stream(fresh_cache):
    # Inductor's compile-time autotuning runs kernels on random example inputs (drawn on
    # the GPU) and eager's check of a random op draws too: a miss must leave the stream
    # torch.manual_seed set (eagerc/random_streams.py), so the program's random numbers are
    # native eager's, and a random op's first (compiling) call repeats after reseeding.
    x = torch.randn(300, 91, device=DEV)
    torch.manual_seed(11)
    want = torch.rand(1000, device=DEV)
    torch.manual_seed(11)
    with eagerc.enabled(DEV, ops=["aten::abs", "aten::sigmoid"]):
        torch.sigmoid(torch.abs(x))  # two compiles
    assert eagerc.stats()["compiles"] >= 2
    assert torch.equal(torch.rand(1000, device=DEV), want)
    with eagerc.enabled(DEV, ops=["aten::randn", "aten::native_dropout"]):
        for call in (lambda: torch.randn(2000, device=DEV),
                     lambda: F.dropout(torch.ones(2000, device=DEV), 0.3)):
            torch.manual_seed(5)
            first = call()  # compiles
            torch.manual_seed(5)
            assert torch.equal(call(), first)
    assert eagerc.stats()["ops"]["aten::randn@CUDA"]["compiles"] == 1


@pytest.mark.parametrize("first, alphas", [
    (5, (2, -3, 7)),                 # 0 and 1 are signature classes
    # Floats too: the launcher's float parameters are doubles (eagerc/compile/
    # gpu_launch_types.py; Inductor's int64_t truncated alpha=0.5 to 0).
    (0.75, (0.5, 2.5, -3.25, 1e-3)),
], ids=["int", "float"])
def test_scalars_are_runtime_inputs_and_hits_skip_python(first, alphas, fresh_cache):
    x, y = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
    expected = {a: x + a * y for a in alphas}
    with eagerc.enabled(DEV, ops=["aten::add.Tensor"]):
        torch.add(x, y, alpha=first)
        before = _C._resolver_calls()
        got = {a: torch.add(x, y, alpha=a) for a in expected}
        assert _C._resolver_calls() == before  # hits: no Python at all
    for a, want in expected.items():
        assert_close(got[a], want)
    assert op_stats("aten::add.Tensor@CUDA")["compiles"] == 1


# A set of ops a model uses: elementwise, reductions, softmax/norms, externs (cuBLAS, cuDNN).
CASES = {
    "abs": lambda x, y: torch.abs(x),
    "add_alpha": lambda x, y: torch.add(x, y, alpha=2),
    "sum_dim": lambda x, y: x.sum(dim=1),
    "softmax": lambda x, y: torch.softmax(x, dim=-1),
    "log_softmax": lambda x, y: F.log_softmax(x, dim=0),
    "gelu": lambda x, y: F.gelu(x),
    "layer_norm": lambda x, y: F.layer_norm(x, (x.shape[-1],)),
    "mm": lambda x, y: x @ y,
    "addmm": lambda x, y: torch.addmm(x, x, y, beta=0.5),
    "amax": lambda x, y: x.amax(dim=0),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "mul_inplace": lambda x, y: x.clone().mul_(y),
    "cumsum": lambda x, y: torch.cumsum(x, 1),
    "conv2d": lambda x, y: F.conv2d(x.view(1, 1, *x.shape), y[:3, :3].reshape(1, 1, 3, 3)),
    # Float scalars as runtime inputs, in pointwise kernels and around a reduction.
    "clamp_floats": lambda x, y: torch.clamp(x, min=-0.5, max=0.25),
    "mul_scalar": lambda x, y: x.mul(0.3),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.02),
    "sum_scaled": lambda x, y: (x * 1.5).sum(dim=0),
    "threshold": lambda x, y: F.threshold(x, 0.1, -2.5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ops_match_native_cuda(name, fresh_cache):
    torch.backends.cudnn.allow_tf32 = False
    fn = CASES[name]
    for n in (16, 33):
        x, y = torch.randn(n, n, device=DEV), torch.randn(n, n, device=DEV)
        expected = fn(x, y)
        with eagerc.enabled(DEV):
            got = fn(x, y)
        assert_close(got, expected)
    stats = eagerc.stats()
    # abs and conv2d reach ops that still fall back on CUDA (abs.out, cudnn_convolution):
    # right results either way; what compiles is in the benchmarks' fallback lists.
    assert stats["hits"] + stats["misses"] > 0


def test_failures_are_remembered_in_l1(fresh_cache):
    # Whatever mm's first call decides (a kernel or a fallback), later calls of the same
    # signature never enter Python.
    a, b = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
    with eagerc.enabled(DEV):
        torch.mm(a, b), torch.addmm(a, a, b)
        before = _C._resolver_calls()
        for _ in range(5):
            out = torch.addmm(a, a, torch.mm(a, b))
        assert _C._resolver_calls() == before
    assert_close(out, torch.addmm(a, a, a @ b))


def test_kernels_run_on_the_current_stream(fresh_cache):
    x = torch.randn(4096, 4096, device=DEV)
    with eagerc.enabled(DEV, ops=["aten::abs"]):
        torch.abs(x)  # compiled
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # the side stream is busy for ~0.1 s
            x.fill_(-2.0)                   # native, on the side stream
            y = torch.abs(x)                # must run after the fill on the same stream
        side.synchronize()
    assert bool((y == 2.0).all())


def test_new_process_loads_self_contained_artifacts(fresh_cache, tmp_path):
    # A child that hangs prints every thread's stack and exits (while other test workers
    # compile on the machine, the first child can run past pytest's 400 s).
    script = textwrap.dedent("""
        import faulthandler; faulthandler.dump_traceback_later(240, exit=True)
        import os, sys, torch, eagerc
        x = torch.arange(-6.0, 6.0, device="cuda").reshape(3, 4)
        with eagerc.enabled("cuda", ops=["aten::abs", "aten::softmax.int", "aten::_softmax"]):
            a = torch.abs(x); s = torch.softmax(x, dim=1)
        assert torch.equal(a, x.abs()), a
        assert torch.allclose(s, torch.softmax(x, dim=1))
        st = eagerc.stats()
        cache = os.environ["EAGERC_CACHE_DIR"]
        mapped = {line.split()[-1] for line in open("/proc/self/maps")
                  if cache in line and line.rstrip().endswith(".so")}
        print("COMPILES", st["compiles"], "LOADS", sum(v.get("disk_loads", 0) for v in st["ops"].values()),
              {k: v for k, v in st["ops"].items() if v["misses"]})
        print("MAPPED", len(mapped), sorted(os.path.basename(m) for m in mapped))
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-1000:] + first.stderr[-6000:]
    assert "COMPILES 0" not in first.stdout
    # The second process gets an empty Inductor cache: nothing of the first one's files
    # (cubins included) is reachable, and no artifact names a cubin file.
    for so in fresh_cache.rglob("*.so"):
        assert b".cubin" not in so.read_bytes(), so
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-second")
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stdout[-1000:] + second.stderr[-6000:]
    assert "COMPILES 0 LOADS" in second.stdout, second.stdout
    loads = int(second.stdout.split("LOADS ")[1].split()[0])
    assert loads >= 2, second.stdout
    # Plan artifacts run in the loaded copy of the launcher of the first one loaded
    # (csrc/artifact.cpp, Artifact::open_in_shared_launcher): fewer libraries than loads.
    mapped = int(second.stdout.split("MAPPED ")[1].split()[0])
    assert 1 <= mapped < loads, second.stdout


def test_captured_graphs_on_gpu_go_through_kernel_cache(fresh_cache, tmp_path):
    script = textwrap.dedent("""
        import torch, eagerc
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).cuda()
        x = torch.randn(8, 16, device="cuda")
        want = m(x)
        f = eagerc.capture(m)
        with torch.no_grad():
            want = m(x)
            for _ in range(3):
                got = f(x)
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), (got - want).abs().max()
        s = eagerc.capture_stats(f)
        print("GRAPHS", s["graphs"], "FROM_DISK", s["graphs_from_disk"], s)
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    assert "FROM_DISK 0" in runs[0].stdout, runs[0].stdout
    assert "FROM_DISK 0" not in runs[1].stdout, runs[1].stdout


def test_hits_allocate_outputs_without_the_dispatcher(fresh_cache):
    # csrc/direct_alloc.cpp: a GPU artifact's outputs come from CUDA's caching allocator
    # directly, as a native CUDA kernel's do, not through aten::empty_strided.
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64, device=DEV)
    with eagerc.enabled(DEV, ops=["aten::abs", "aten::sum.dim_IntList"]):
        torch.abs(x), x.sum(1)  # compile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            a, s = torch.abs(x), x.sum(1)
    assert_close(a, x.abs())
    assert_close(s, x.sum(1))
    names = [e.key for e in prof.key_averages()]
    assert "aten::abs" in names and "aten::empty_strided" not in names, names
    assert a.device == x.device and a.untyped_storage().device == x.device
    assert op_stats("aten::abs@CUDA")["hits"] >= 1


def test_import_keeps_cuda_autograd_and_override_mode_trains(tmp_path):
    # A registered PrivateUse1 backend would become torch's accelerator and break every
    # CUDA backward (pytorch/pytorch#161129): on a GPU machine `import eagerc` leaves it
    # alone (eagerc/_config.py), and a training step in override mode matches native CUDA.
    script = textwrap.dedent("""
        import contextlib, copy, torch, eagerc
        assert torch.accelerator.current_accelerator().type == "cuda"
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).cuda()
        d = copy.deepcopy(m)
        x, y = torch.randn(8, 16, device="cuda"), torch.randint(0, 4, (8,), device="cuda")
        for model, served in ((m, False), (d, True)):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with eagerc.enabled("cuda") if served else contextlib.nullcontext():
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        for p, q in zip(m.parameters(), d.parameters()):
            assert torch.allclose(p, q, atol=1e-5), (p - q).abs().max()
        assert eagerc.stats()["compiles"] > 0
        print("OK")
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("EAGERC_BACKING", None)
    env.pop("EAGERC_DEVICE", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout[-1000:] + done.stderr[-4000:]


_CUDA_OUT_OF_MEMORY = textwrap.dedent("""
    import json, torch, eagerc
    big = lambda: torch.abs(torch.zeros(1, device="cuda").expand(2**30))  # a 4 GB output
    out = {}
    with eagerc.enabled("cuda", ops=["aten::abs"]):
        for n in (10**6, 10**7, 10**8):  # a kernel whose guard takes the big call's size
            torch.abs(torch.zeros(1, device="cuda").expand(n))
        abs_hits = lambda: sum(v["hits"] for k, v in eagerc.stats()["ops"].items() if k.startswith("aten::abs@"))
        compiles, hits = eagerc.stats()["compiles"], abs_hits()
        # 2 GB, under the 4 GB output on any GPU (1/32 was 4.4 GB on an H200's 141 GB)
        torch.cuda.set_per_process_memory_fraction(2**31 / torch.cuda.get_device_properties(0).total_memory)
        errors = []
        for _ in range(2):
            try:
                big()
            except Exception as e:
                errors.append([type(e).__name__, str(e)[:40]])
        out["eagerc"] = errors
        out["new hits"], out["new compiles"] = abs_hits() - hits, eagerc.stats()["compiles"] - compiles
        out["next call"] = torch.abs(torch.full((5,), -2.0, device="cuda").expand(5)).tolist()
    try:
        big()
    except Exception as e:
        out["native"] = [type(e).__name__, str(e)[:40]]
    print(json.dumps(out))
""")


def test_out_of_memory_inside_a_gpu_kernel_raises_cudas_error(tmp_path):
    # The caching allocator's OutOfMemoryError, raised inside the compiled wrapper, reaches
    # the caller as eager's (type and message), not as the wrapper's generic error or a crash.
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _CUDA_OUT_OF_MEMORY], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["native"][0] == "OutOfMemoryError" and "out of memory" in out["native"][1]
    assert out["eagerc"] == [out["native"]] * 2 and out["new compiles"] == 0
    assert out["new hits"] == 2  # the failing calls were hits: the kernel itself raised
    assert out["next call"] == [2.0] * 5
