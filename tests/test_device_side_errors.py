"""Eager's errors from compiled kernels.

A compiled kernel checks index bounds itself and words a failure as its generated code
("cpp_fused_0, /tmp/.../x.cpp:44, index out of bounds: 0 <= tmp7 < ks2"). On a miss eager's
kernel runs first (eagerc/per_op/eager_rules.py), but a bad index reaching a kernel that already
exists used to get that message. The holder now has eager's kernel run such a call again
(csrc/kernel_holder.cpp), so the caller gets eager's own exception and message; kernels that
index are compiled single-threaded, since an exception leaving an OpenMP region would
terminate the process. Each case: a valid call (compiles), the same again (a hit), then a
bad index (the kernel's check fires), then a valid call; a subprocess, since the failure
this guards against killed the process. Then the same with the kernels loaded from disk: in
the default run by that process once it forgot its tables and open stores (one interpreter
start, not two), in the slow sweep of every indexing op by a second process.

On GPU memory (EAGERC_BACKING=cuda) a Triton kernel checks an index with a device-side
assert, as native CUDA's kernels do: the error reaches the host at the next synchronizing
call as CUDA's own (torch.AcceleratorError, "CUDA error: device-side assert triggered"),
and the process's CUDA context is unusable afterwards, natively too. There eager's
behaviour is native CUDA's, so each op runs in a process of its own, natively and on the
device, and the bad call's error must be native CUDA's (docs/gpu.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from subprocess_passes import RUN_PASSES

_SCRIPT = textwrap.dedent("""
    import json, sys, torch, eagerc
    mode, names, n = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    passes = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    device = "cpu" if mode == "override" else "eagerc"
    CALLS = {
        "index_select": lambda w, i: torch.index_select(w, 0, i),
        "embedding": lambda w, i: torch.nn.functional.embedding(i, w),
        "gather": lambda w, i: torch.gather(w, 0, i[:, None].expand(-1, 4).contiguous()),
        "index": lambda w, i: w[i],
        "scatter": lambda w, i: torch.zeros_like(w).scatter(0, i[:, None].expand(-1, 4).contiguous(), 1.0),
        "index_add": lambda w, i: torch.zeros_like(w).index_add(0, i, torch.ones(i.numel(), 4, device=w.device)),
        "index_put": lambda w, i: w.clone().index_put_((i,), torch.ones(i.numel(), 4, device=w.device)),
        "take": lambda w, i: torch.take(w, i * 4),
        "nll_loss": lambda w, i: torch.nn.functional.nll_loss(w[:i.numel()].log_softmax(1), i % 4 + (i >= n) * 9),
    }
    def outcome(fn, w, i):
        try:
            return ["ok", fn(w, i).cpu().sum().item()]
        except Exception as e:
            return [type(e).__name__, str(e).splitlines()[0]]
    torch.manual_seed(0)
    w = torch.randn(n, 4)
    good = torch.arange(n) % n
    bad = good.clone(); bad[-1] = n + 5
    def run_all():
        results = {}
        for name in names:
            fn = CALLS[name]
            want = [outcome(fn, w, good), outcome(fn, w, bad)]
            if mode == "override":
                eagerc.enable("cpu")
            W, G, B = w.to(device), good.to(device), bad.to(device)
            got = [outcome(fn, W, G), outcome(fn, W, G), outcome(fn, W, B), outcome(fn, W, G)]
            if mode == "override":
                eagerc.disable()
            results[name] = {"want": want, "got": got}
        return results
""") + RUN_PASSES


def _on_gpu_memory() -> bool:
    return os.environ.get("EAGERC_BACKING", "cpu").lower() == "cuda"


# One op, one process (a device-side assert ends the process's use of CUDA): two valid
# calls, then the bad index, on `device` ("cuda": native; "eagerc": GPU memory).
_GPU_SCRIPT = _SCRIPT.split("torch.manual_seed(0)")[0].replace(
    'device = "cpu" if mode == "override" else "eagerc"', "device = mode") + textwrap.dedent("""
    torch.manual_seed(0)
    w = torch.randn(n, 4)
    good = torch.arange(n) % n
    bad = good.clone(); bad[-1] = n + 5
    W, G, B = w.to(device), good.to(device), bad.to(device)
    fn = CALLS[names[0]]
    got = [outcome(fn, W, G), outcome(fn, W, G), outcome(fn, W, B)]
    print("RESULT " + json.dumps({"got": got, "want": outcome(fn, w, good)}))
""")


def _run_gpu(tmp_path, device, name, n):
    proc = subprocess.run([sys.executable, "-c", _GPU_SCRIPT, device, name, str(n)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EAGERC_CACHE_DIR": str(tmp_path / "cache")})
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, f"{device} {name}: no result ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(line[len("RESULT "):])


def _check_gpu_memory(tmp_path, names, n):
    for name in names:
        native = _run_gpu(tmp_path, "cuda", name, n)
        assert native["got"][2][0] != "ok", f"{name}: native CUDA accepts the bad index"
        for run in range(2):  # the second process loads the kernel from disk
            got = _run_gpu(tmp_path, "eagerc", name, n)["got"]
            for i in (0, 1):
                assert got[i][0] == "ok" and abs(got[i][1] - native["want"][1]) <= \
                    1e-4 * (1 + abs(native["want"][1])), (name, run, i, got)
            assert got[2] == native["got"][2], f"{name}, process {run}: {got[2]} != native CUDA's {native['got'][2]}"


def _run(tmp_path, mode, names, n, passes=1):
    """The script's runs: [{"results", "compiles", "disk_loads"}] per pass."""
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, mode, ",".join(names), str(n), str(passes)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EAGERC_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, f"process died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _check(tmp_path, mode, names, n, second_process=False):
    """The calls with new kernels, then with the same kernels loaded from disk (by a second
    process, or by the first once it forgot its tables)."""
    if second_process:
        runs = _run(tmp_path, mode, names, n) + _run(tmp_path, mode, names, n)
    else:
        runs = _run(tmp_path, mode, names, n, passes=2)
    assert runs[0]["compiles"] > 0, runs[0]
    assert runs[1]["compiles"] == 0 and runs[1]["disk_loads"] > 0, runs[1]
    for run, results in enumerate(r["results"] for r in runs):
        for name, r in results.items():
            good, bad = r["want"]
            assert bad[0] != "ok", f"{name}: eager accepts the bad index; the case tests nothing"
            for i, (got, want) in enumerate(zip(r["got"], [good, good, bad, good])):
                if want[0] == "ok":
                    assert got[0] == "ok" and abs(got[1] - want[1]) <= 1e-4 * (1 + abs(want[1])), \
                        (name, run, i, got, want)
                else:
                    assert got == want, f"{name}, process {run}, call {i}: {got} != eager's {want}"
                assert ".cpp" not in str(got), (name, got)


@pytest.mark.parametrize("mode", ["override", "device"])
def test_bad_index_into_compiled_kernel_raises_eagers_error(tmp_path, mode):
    if mode == "device" and _on_gpu_memory():
        _check_gpu_memory(tmp_path, ["index_select", "gather"], 10)
    else:
        _check(tmp_path, mode, ["index_select", "gather"], 10)


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 40000])  # 40000 rows: a parallel-sized call
@pytest.mark.parametrize("mode", ["override", "device"])
def test_bad_index_every_indexing_op(tmp_path, mode, n):
    if mode == "device" and _on_gpu_memory():
        pytest.skip("on GPU memory a bad index is a device-side assert that ends the process's "
                    "use of CUDA, as natively: test_bad_index_into_compiled_kernel_raises_eagers_error "
                    "compares it with native CUDA, one process per op")
    _check(tmp_path, mode, ["index_select", "embedding", "gather", "index", "scatter",
                            "index_add", "index_put", "take", "nll_loss"], n, second_process=True)
