"""The eagerc device on GPU memory (EAGERC_BACKING=cuda): a new GPU device with no
hand-written compute kernels. Its memory comes from PyTorch's CUDA caching allocator and
every compute op is a Triton kernel compiled by eagerc, run on the device's own tensors
(ops whose wrappers call CUDA's ATen functions, such as convolution, run on zero-copy CUDA
aliases).

The backing is chosen at import, so each test runs a fresh process. The model tests of the
host-memory device run on it too: ``EAGERC_BACKING=cuda pytest tests/test_device_models.py``
(tools/gpu_check.sh). Skipped where torch sees no CUDA GPU.
"""
from __future__ import annotations


import pytest
import torch
from gpu_device_runner import run_on_gpu_device

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_memory_is_gpu_memory_and_ops_are_compiled_for_cuda(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        from eagerc import targets
        t = targets.for_device("eagerc")
        assert (t.home, t.codegen.name, t.host_aliases, t.new_device) == ("cuda", "triton", True, True), t
        before = torch.cuda.memory_allocated()
        x = torch.randn(1024, 1024).to("eagerc")
        assert torch.cuda.memory_allocated() - before >= 1024 * 1024 * 4
        y = torch.randn(1024, 1024).to("eagerc")
        cx, cy = x.cpu(), y.cpu()
        got = {"add": (x + 2 * y).cpu(), "softmax": torch.softmax(x, -1).cpu(),
               "mm": (x @ y).cpu(), "sum": x.sum(1).cpu(), "item": (x * 0 + 3)[0, 0].item()}
        want = {"add": cx + 2 * cy, "softmax": torch.softmax(cx, -1), "mm": cx @ cy,
                "sum": cx.sum(1), "item": 3.0}
        for k in got:
            if k == "item":
                assert got[k] == want[k]
            else:
                assert torch.allclose(got[k], want[k], atol=1e-3, rtol=1e-4), k
        s = eagerc.stats()
        assert s["fallbacks"] == 0, s
        compiled = sum(v["compiles"] + v.get("disk_loads", 0) for k, v in s["ops"].items()
                       if k.endswith("@PrivateUse1"))
        assert compiled >= 4, s
        z = torch.empty(5, device="eagerc")
        z.resize_(100)              # storage resize on GPU memory keeps the device
        z.fill_(1.5)
        assert z.cpu().sum().item() == 150.0
        base = torch.arange(4.0).to("eagerc")
        grown = torch.empty(0, device="eagerc").set_(base.untyped_storage(), 0, (3, 4), (4, 1))
        assert grown.cpu()[0].tolist() == [0.0, 1.0, 2.0, 3.0]  # set_ grew GPU memory, kept bytes
        torch.eagerc.synchronize()
        print("OK", compiled)
    """, tmp_path / "cache")
    assert "OK" in out


def test_generated_and_cublas_kernels_run_on_the_devices_own_tensors(tmp_path):
    out = run_on_gpu_device("""
        import os, torch, eagerc
        import torch.nn.functional as F
        torch.manual_seed(0)
        x, w, b, m = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(5), torch.randn(192, 5)
        xd, wd, bd, md = (t.to("eagerc") for t in (x, w, b, m))
        cases = {
            "aten::add.Tensor": (lambda x, w, b, m: x + 2 * x),
            "aten::_softmax": (lambda x, w, b, m: torch.softmax(x, -1)),
            "aten::sum.dim_IntList": (lambda x, w, b, m: x.sum(1)),
            "aten::addmm": (lambda x, w, b, m: torch.addmm(b, x.flatten(1), m)),
            "aten::mm": (lambda x, w, b, m: x.flatten(1) @ m),
            "aten::convolution": (lambda x, w, b, m: F.conv2d(x, w)),
        }
        for name, fn in cases.items():
            for _ in range(2):  # a miss, then a hit
                got = fn(xd, wd, bd, md)
            assert got.device.type == "eagerc", name
            assert torch.allclose(got.cpu(), fn(x, w, b, m), atol=1e-4, rtol=1e-4), name
        s = eagerc.stats()
        assert s["fallbacks"] == 0 and s["aliased"] == 0, s
        ops = s["ops"]
        on_aliases = {n: ops[n + "@PrivateUse1"]["on_home_aliases"] for n in cases}
        # Generated Triton takes the device's tensors; CUDA's ATen kernels called
        # from a wrapper (cuBLAS, cuDNN) guard a CUDA device: CUDA aliases.
        externs = {"aten::addmm": True, "aten::mm": True, "aten::convolution": True}
        assert on_aliases == {**{n: False for n in cases}, **externs}, on_aliases
        for n in cases:
            assert ops[n + "@PrivateUse1"]["hits"] >= 1, (n, ops[n + "@PrivateUse1"])
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_a_refused_convolution_runs_cudas_kernel_on_aliases(tmp_path):
    # A refused op's composite kernel may pick a backend by device type (convolution ->
    # _convolution -> convolution_overrideable, NotImplementedError on this device): on GPU
    # memory a fallback runs CUDA's own kernel on aliases instead.
    out = run_on_gpu_device("""
        import torch, eagerc
        import torch.nn.functional as F
        from eagerc.compile import known_wrong
        original = known_wrong.reason
        known_wrong.reason = lambda op, args: ("refused by the test" if "convolution" in str(op)
                                              else original(op, args))
        torch.manual_seed(0)
        x, w = torch.randn(4, 3, 16, 16), torch.randn(8, 3, 3, 3)
        got = F.conv2d(x.to("eagerc"), w.to("eagerc"), padding=1)
        assert got.device.type == "eagerc"
        assert torch.allclose(got.cpu(), F.conv2d(x, w, padding=1), atol=1e-4, rtol=1e-4)
        s = eagerc.stats()["ops"]["aten::convolution@PrivateUse1"]
        assert s["fallbacks"] == 1 and s["aliased"] == 1, s
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_training_step_on_gpu_memory_matches_cpu(tmp_path):
    out = run_on_gpu_device("""
        import copy, torch, eagerc
        from torch import nn
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
        d = copy.deepcopy(m).to("eagerc")
        x, y = torch.randn(8, 20), torch.randint(0, 5, (8,))
        for model, xx, yy in ((m, x, y), (d, x.to("eagerc"), y.to("eagerc"))):
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            loss = nn.functional.cross_entropy(model(xx), yy)
            loss.backward(); opt.step()
        for (n, p), q in zip(m.named_parameters(), d.parameters()):
            assert q.device.type == "eagerc"
            assert torch.allclose(p, q.cpu(), atol=1e-5), n
        assert eagerc.stats()["fallbacks"] == 0
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_attention_takes_cudas_efficient_kernel_where_its_branch_is_device_neutral(tmp_path):
    # csrc/device/attention_choice.cpp: fp32 inference (CUDA picks memory-efficient
    # attention) runs that one fused op, also with a float mask; with gradients, fp16
    # without a mask (CUDA picks flash, whose composite branch is CUDA-only) and a
    # MATH-only context take the math path. All against native CUDA.
    out = run_on_gpu_device("""
        import contextlib, torch, eagerc
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        EFF = "aten::_scaled_dot_product_efficient_attention@PrivateUse1"
        SOFTMAX = ("aten::_safe_softmax@PrivateUse1", "aten::_softmax@PrivateUse1")
        def reached():
            return {n for n, s in eagerc.stats()["ops"].items() if s["hits"] + s["misses"]}
        def check(dtype, mask, expect_fused, grad=False, tol=2e-5, ctx=None):
            torch.manual_seed(0)
            q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", dtype=dtype) for _ in range(3))
            kw = {} if mask is None else {"attn_mask": mask}
            dev_in = [t.to("eagerc").detach().requires_grad_(grad) for t in (q, k, v)]
            dkw = {key: t.to("eagerc") for key, t in kw.items()}
            eagerc.reset_stats()
            with ctx or contextlib.nullcontext():
                want = F.scaled_dot_product_attention(q, k, v, **kw)
                got = F.scaled_dot_product_attention(*dev_in, **dkw)
            assert got.device.type == "eagerc"
            assert torch.allclose(got.to("cuda"), want, atol=tol, rtol=tol), (got.to("cuda") - want).abs().max()
            ops = reached()
            assert (EFF in ops) == expect_fused, ops
            assert expect_fused != any(s in ops for s in SOFTMAX), ops
            if grad:
                # Gradients against CPU: with the eagerc device registered it is torch's
                # accelerator, and torch's engine asserts in a backward over CUDA tensors.
                cpu_in = [t.detach().cpu().requires_grad_() for t in (q, k, v)]
                F.scaled_dot_product_attention(*cpu_in).square().sum().backward()
                got.square().sum().backward()
                for a, b in zip(cpu_in, dev_in):
                    assert torch.allclose(b.grad.cpu(), a.grad, atol=1e-4, rtol=1e-4)
            assert eagerc.stats()["fallbacks"] == 0, eagerc.stats()
        check(torch.float32, None, True)
        check(torch.float32, torch.randn(2, 1, 64, 64, device="cuda"), True)
        check(torch.float32, None, False, grad=True)
        check(torch.float16, None, False, tol=2e-3)
        check(torch.float32, None, False, ctx=sdpa_kernel(SDPBackend.MATH))
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_typed_convolution_and_matmul_hits_run_on_reused_cuda_aliases(tmp_path):
    # On GPU memory, convolution, mm and addmm run on CUDA aliases (cuDNN's and cuBLAS's
    # guards refuse other device types); their typed kernels (csrc/unboxed_*.cpp) serve the
    # hits, on aliases kept from call to call: new tensors every call, a weight changed in
    # place between calls, an input sharing its storage with the weight.
    out = run_on_gpu_device("""
        import torch, eagerc
        import torch.nn.functional as F
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(0)
        w, b, m, bias = torch.randn(4, 3, 3, 3), torch.randn(4), torch.randn(5, 6), torch.randn(6)
        dw, db, dm, dbias = (t.to("eagerc") for t in (w, b, m, bias))
        for i in range(4):
            x, a = torch.randn(2, 3, 8, 8), torch.randn(7, 5)
            dx, da = x.to("eagerc"), a.to("eagerc")
            got = {"conv": F.conv2d(dx, dw, db, padding=1).cpu(), "mm": (da @ dm).cpu(),
                   "addmm": torch.addmm(dbias, da, dm).cpu()}
            want = {"conv": F.conv2d(x, w, b, padding=1), "mm": a @ m, "addmm": torch.addmm(bias, a, m)}
            for k in got:
                assert torch.allclose(got[k], want[k], atol=1e-4, rtol=1e-4), (i, k)
            dw.mul_(2)
            w.mul_(2)
        both = torch.randn(30)
        dboth = both.to("eagerc")
        got = (dboth[:25].view(5, 5) @ dboth[5:30].view(5, 5)).cpu()
        assert torch.allclose(got, both[:25].view(5, 5) @ both[5:30].view(5, 5), atol=1e-4)
        s = eagerc.stats()["ops"]
        for op in ("aten::convolution@PrivateUse1", "aten::mm@PrivateUse1", "aten::addmm@PrivateUse1"):
            st = s[op]
            assert st["hits"] >= 3 and st["fallbacks"] == 0 and st["on_home_aliases"], (op, st)
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_gpu_size_classes(tmp_path):
    # The device's tensors live in GPU memory, so they take the GPU size classes (small /
    # medium / large: csrc/signature.cpp), not the host's: softmax at 64x64 and at
    # 8192x8192 are two kernels, each tuned at its own size; another small size hits.
    out = run_on_gpu_device("""
        import torch, eagerc

        def compiled():
            st = eagerc.stats()["ops"]["aten::_softmax@PrivateUse1"]
            return st["compiles"] + st.get("disk_loads", 0)

        small = torch.randn(64, 64)
        got = torch.softmax(small.to("eagerc"), -1)
        assert compiled() == 1
        large = torch.randn(8192, 8192, device="cuda")
        got_large = torch.softmax(large.to("eagerc"), -1)
        assert compiled() == 2
        torch.softmax(torch.randn(100, 100).to("eagerc"), -1)  # small class: a hit
        assert compiled() == 2
        torch.testing.assert_close(got.cpu(), torch.softmax(small, -1))
        torch.testing.assert_close(got_large.to("cuda"), torch.softmax(large, -1))
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_torch_compile_on_gpu_memory_generates_triton_and_trains(tmp_path):
    # torch.compile on the device over GPU memory: each graph is compiled for CUDA by
    # Inductor's Triton code generator and run on aliases (eagerc/device/compile_on_home.py);
    # forward, backward and an optimizer step equal CUDA eager's.
    out = run_on_gpu_device("""
        import torch, eagerc
        from torch._inductor.utils import run_and_get_code

        # The reference trains on the CPU: in a process where the device is registered,
        # torch's autograd engine has no stream for CUDA tensors (the device is torch's
        # accelerator), so native CUDA backward cannot run here.
        torch.manual_seed(0)
        def make():
            return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                       torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
        ref, dev = make(), make().to("eagerc")
        dev.load_state_dict(ref.state_dict())
        x = torch.randn(16, 32)
        compiled = torch.compile(dev)
        out, code = run_and_get_code(compiled, x.to("eagerc"))
        assert out.device.type == "eagerc", out.device
        assert any("@triton.jit" in c for c in code), "no Triton kernel generated"
        torch.testing.assert_close(out.cpu(), ref(x), rtol=1e-4, atol=1e-5)
        opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
        opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
        for step in range(3):
            for model, opt, inp in ((ref, opt_ref, x), (compiled, opt_dev, x.to("eagerc"))):
                opt.zero_grad()
                model(inp).pow(2).mean().backward()
                opt.step()
        for p, q in zip(ref.parameters(), dev.parameters()):
            assert q.device.type == "eagerc"
            torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)
        f = torch.compile(lambda t: torch.sin(t) + torch.ones(t.shape, device=t.device))
        t = torch.randn(9, 7)
        torch.testing.assert_close(f(t.to("eagerc")).cpu(), torch.sin(t) + 1)
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_an_index_past_the_gpus_raises_as_native_cuda_does(tmp_path):
    # eagerc:N exists for each GPU; one past them raises what native CUDA raises for
    # cuda:N (type and first line), before anything touches the GPU.
    out = run_on_gpu_device("""
        import torch, eagerc
        n = torch.eagerc.device_count()
        assert n == torch.cuda.device_count()

        def error(device):
            try:
                torch.empty(1, device=device)
            except Exception as e:
                return type(e).__name__, str(e).splitlines()[0]
            raise AssertionError(f"allocated on {device}, which does not exist")

        for past in (n, n + 5):
            native, got = error(f"cuda:{past}"), error(f"eagerc:{past}")
            print(native, got)
            assert got == native, (got, native)
        assert torch.empty(2, device=f"eagerc:{n - 1}").device == torch.device("eagerc", n - 1)
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_random_ops_follow_the_seed_from_their_first_call(tmp_path):
    # The device's compiled random ops draw their seeds from cuda:N's generator (Inductor's
    # seed buffer, filled on CUDA aliases). A first call compiles: eager's check and the
    # compile's autotuning draw too, and must leave the seeded stream as it was
    # (eagerc/random_streams.py); torch.eagerc.manual_seed seeds that generator as well.
    out = run_on_gpu_device("""
        import torch, eagerc
        calls = {
            "rand": lambda: torch.rand(3000, device="eagerc"),
            "randn": lambda: torch.randn(3000, device="eagerc"),
            "randint": lambda: torch.randint(0, 10, (3000,), device="eagerc"),
            "dropout": lambda: torch.nn.functional.dropout(torch.ones(3000, device="eagerc"), 0.25),
        }
        for seed in (torch.manual_seed, torch.eagerc.manual_seed):
            for name, call in calls.items():
                seed(1234)
                first = call().cpu()
                other = call().cpu()
                seed(1234)
                again = call().cpu()
                assert torch.equal(first, again), (seed, name)
                assert not torch.equal(first, other), (seed, name)
        s = eagerc.stats()
        assert s["fallbacks"] == 0, s
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_an_op_cuda_lacks_takes_the_host_round_trip(tmp_path):
    # CUDA has no histogram kernel (natively it raises NotImplementedError): aliases of the
    # device's memory cannot serve it, so it takes the rungs after them (docs/vendor.md):
    # the host round trip, counted and warned once; with that off, eagerc's
    # NotImplementedError naming the op. Eager's check of histogram over given edges runs
    # on CPU copies, so that call compiles or falls back instead of raising CUDA's error.
    out = run_on_gpu_device("""
        import warnings, torch, eagerc
        from eagerc import _C
        x = torch.randn(50)
        edges = torch.linspace(-2, 2, 9)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.histogram(x.to("eagerc"), bins=4)
            got_edges = torch.histogram(x.to("eagerc"), bins=edges.to("eagerc"))
        for g, w in ((got, torch.histogram(x, bins=4)), (got_edges, torch.histogram(x, bins=edges))):
            assert g.hist.device.type == "eagerc"
            torch.testing.assert_close(g.hist.cpu(), w.hist)
            torch.testing.assert_close(g.bin_edges.cpu(), w.bin_edges)
        ops = eagerc.stats()["ops"]
        bin_ct = ops["aten::histogram.bin_ct@PrivateUse1"]
        assert bin_ct["host_round_trips"] == 1 and bin_ct["aliased"] == 0, bin_ct
        assert ops["aten::histogram.bins_tensor@PrivateUse1"]["aliased"] == 0, ops
        assert any("histogram.bin_ct runs through the host round trip" in str(w.message) for w in caught)
        _C._set_cpu_fallback(False)
        try:
            torch.histogram(x.to("eagerc"), bins=4)
            raise AssertionError("no error with the host round trip off")
        except NotImplementedError as e:
            assert "aten::histogram.bin_ct" in str(e) and "EAGERC_CPU_FALLBACK=0" in str(e), e
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_inference_batch_norm_is_one_launch(tmp_path):
    # Its output, and the running mean and inverse std it returns as native CUDA's
    # native_batch_norm does: three independent kernels (eagerc/compile/
    # batch_norm_statistics.py), which combo kernels launch as one (triton_for_*).
    out = run_on_gpu_device("""
        import torch, torch.nn.functional as F, eagerc
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile
        x, w, b = torch.randn(2, 64, 28, 28), torch.randn(64), torch.randn(64)
        mean, var = torch.randn(64), torch.rand(64) + 0.5
        native = [t.cuda() for t in (x, w, b, mean, var)]
        want = torch.ops.aten.native_batch_norm(*native, False, 0.1, 1e-5)
        args = [t.to("eagerc") for t in (x, w, b, mean, var)]

        def kernels(inputs):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    F.batch_norm(inputs[0], inputs[3], inputs[4], inputs[1], inputs[2], False, 0.1, 1e-5)
                torch.cuda.synchronize()
            return [e.name for e in prof.events() if e.device_type != DeviceType.CPU]

        with torch.no_grad():
            for _ in range(2):  # a miss, then a hit
                got = torch.ops.aten.native_batch_norm(*args, False, 0.1, 1e-5)
            torch.cuda.synchronize()
            on_native, on_device = kernels(native), kernels(args)
        for g, n in zip(got, want):
            torch.testing.assert_close(g.cpu(), n.cpu())
        print("KERNELS", len(on_native), len(on_device), sorted(set(on_device)))
    """, tmp_path / "cache")
    line = next(l for l in out.splitlines() if l.startswith("KERNELS"))
    _, on_native, on_device, *_ = line.split()
    assert int(on_native) >= 5 and int(on_device) == 5, line  # 5 calls, one launch each
    assert line.count("triton_") == 1 and "triton_for" in line, line  # a combo kernel


def test_adamw_foreach_runs_cudas_multi_tensor_kernels_on_aliases(tmp_path):
    # AdamW(foreach=True) calls _foreach_div_.ScalarList and _foreach_addcdiv_.ScalarList
    # each step. A Scalar[] is no argument a compiled kernel takes, and their composite
    # loops one kernel per parameter: on GPU memory CUDA's multi-tensor kernels serve them
    # on aliases, one call for all parameters, and the step equals native CUDA's.
    out = run_on_gpu_device("""
        import torch, eagerc
        torch.manual_seed(0)
        params = [torch.randn(n, 7, device="cuda") for n in (3, 5, 11, 2)]
        grads = [torch.randn_like(p) for p in params]

        def steps(device):
            ps = [p.detach().clone().to(device).requires_grad_() for p in params]
            opt = torch.optim.AdamW(ps, lr=1e-2, foreach=True)
            for _ in range(3):
                for p, g in zip(ps, grads):
                    p.grad = g.to(device)
                opt.step()
            return [p.detach().to("cuda") for p in ps]

        want = steps("cuda")
        eagerc.reset_stats()
        got = steps("eagerc")
        for a, b in zip(got, want):
            assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), (a - b).abs().max()
        ops = eagerc.stats()["ops"]
        for name in ("aten::_foreach_div_.ScalarList", "aten::_foreach_addcdiv_.ScalarList"):
            assert ops[name + "@PrivateUse1"]["aliased"] == 3, ops.get(name + "@PrivateUse1")
        per_tensor = [k for k in ops if k.startswith(("aten::div_.Scalar@", "aten::addcdiv_@"))]
        assert not per_tensor, per_tensor
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
