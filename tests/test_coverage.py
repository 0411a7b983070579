"""python -m eagerc.coverage: statuses, the report files, --compare, the worker pool's
crash/timeout handling, and report.html in a real headless browser (chromium).

The sweep on a fixed subset is `slow` (it compiles a few kernels in worker processes);
the rest builds reports from records and runs in seconds.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

from eagerc.coverage import check, classify, compare, enumerate as enum, report_html, report_json, report_md
from eagerc.coverage import runner
from eagerc.coverage.samples import Call, NoSample, Plan, schema_call

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Known answers on the eagerc device (docs/coverage.md explains each status).
KNOWN = {
    "aten::add.Tensor": "pass",             # generated C++
    "aten::abs": "pass",
    "aten::mm": "extern",                   # the artifact calls aoti_torch_cpu_mm_out
    "aten::empty.memory_format": "runtime",  # the device's hand-written allocation
    "aten::copy_": "runtime",               # copies reach the runtime's _copy_from
    "aten::view": "runtime",
    "aten::nonzero": "aliased",             # data-dependent shape: ATen's kernel on aliases
    "aten::bernoulli.p": "random",          # statistics, not values
    "aten::linear": "decomposed",           # CompositeImplicitAutograd
    "aten::_cudnn_rnn": "no_sample",        # no CPU kernel to compare with
}
SUBSET = ",".join(KNOWN)


def coverage(*args, check_rc=True):
    proc = subprocess.run([sys.executable, "-m", "eagerc.coverage", *args, "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    if check_rc:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


# ------------------------------------------------------------------ the pieces

def test_every_dispatcher_overload_is_enumerated_and_globs_select():
    names = enum.all_overloads()
    assert len(names) > 2500 and "aten::add.Tensor" in names and "aten::add.out" in names
    assert enum.select(["aten::add.Tensor", "abs*"], names)[:3] == ["aten::abs", "aten::abs.out", "aten::abs_"]


def test_static_facts():
    assert enum.facts("aten::linear").composite_implicit
    assert enum.facts("aten::bernoulli.p").random
    assert enum.facts("aten::transpose.int").view
    assert not enum.facts("aten::_cudnn_rnn").has_cpu_kernel
    assert enum.family("aten::_foreach_add_.List") == "foreach"
    assert runner.static_record(enum.facts("aten::linear"), "float32")["status"] == "decomposed"
    assert runner.static_record(enum.facts("aten::add.Tensor"), "float32") is None


def test_schema_samples():
    call = schema_call("aten::add.out", torch.float16)
    assert [a.dtype for a in call.args] == [torch.float16, torch.float16]
    assert call.kwargs["alpha"] == 1 and call.kwargs["out"].shape == (0,)
    assert schema_call("aten::index.Tensor", torch.float32).args[1][0].dtype == torch.int64
    with pytest.raises(NoSample, match="argument 'reduce' of type str"):
        schema_call("aten::scatter_reduce.two", torch.float32)


def test_worst_status_and_extern_names(tmp_path):
    assert classify.worst(["pass", "aliased", "extern"]) == "aliased"
    assert classify.worst(["pass", "mismatch", "compile_error"]) == "mismatch"
    lib = tmp_path / "k.so"
    lib.write_bytes(b"\0aoti_torch_empty_strided\0aoti_torch_cpu_mm_out\0aoti_torch_cpu_randint_low_out\0")
    assert classify.externs([str(lib)]) == ["aoti_torch_cpu_mm_out"]
    assert classify.served_status({"fallbacks": 1, "fallback_reasons": {"no lowering\nmore": 1}}, []) == \
        ("compile_error", "no lowering")
    assert classify.served_status({"aliased": 1}, [])[0] == "aliased"
    assert classify.served_status({"misses": 1, "compiles": 1}, ["aoti_torch_cpu_mm_out"])[0] == "extern"


def test_checks():
    a = torch.arange(6.0)
    assert check.values(a, a.clone()) is None
    bad = check.values(a + torch.tensor([0, 0, 0, 0.5, 0, 0]), a)
    assert bad["max_abs"] == 0.5 and bad["output"] == 0
    assert check.values(a.half(), a)["message"].startswith("output 0: torch.float16")
    g = torch.Generator().manual_seed(1)
    assert check.statistics(torch.randn(500, generator=g), torch.randn(500)) is None
    assert "mean" in check.statistics(torch.zeros(500), torch.randn(500))["message"]
    assert check.metadata(torch.empty(3, 2), torch.empty(3, 2)) is None


# ------------------------------------------------------ reports from records

def _records():
    rows = [("aten::add.Tensor", "pass", ""), ("aten::mm", "extern", "aoti_torch_cpu_mm_out"),
            ("aten::abs", "mismatch", "values: Tensor-likes are not close!"),
            ("aten::linalg_inv_ex", "compile_error", "Inductor has no lowering for this op"),
            ("aten::linalg_svd", "compile_error", "Inductor has no lowering for this op"),
            ("aten::empty.memory_format", "runtime", "the device's hand-written runtime"),
            ("aten::linear", "decomposed", "CompositeImplicitAutograd")]
    records = {(op, "float32"): {"op": op, "dtype": "float32", "status": s, "detail": d} for op, s, d in rows}
    records[("aten::mm", "float32")]["externs"] = ["aoti_torch_cpu_mm_out"]
    return records


def _report(records=None, plans=None):
    plan = Plan("float32", False, opinfo_ops={"add": ["aten::add.Tensor"], "abs": ["aten::abs"],
                                              "mm": ["aten::mm", "aten::add.Tensor"]})
    return report_json.build(records or _records(), plans or {"float32": plan}, device="eagerc",
                             dtypes=["float32"], grad=False, command=["test"])


def test_report_json_schema(tmp_path):
    report = _report()
    path = str(tmp_path / "report.json")
    report_json.write(report, path)
    loaded = report_json.load(path)
    assert loaded["schema_version"] == report_json.SCHEMA_VERSION
    assert {"torch_version", "eagerc_version", "device", "dtypes", "summary", "ops", "statuses"} <= set(loaded)
    s = loaded["summary"]["float32"]
    assert s["total"] == 7 and s["tested"] == 6 and s["working"] == 3 and s["by_status"]["compile_error"] == 2
    assert loaded["ops"]["aten::mm"] == {"family": "mm", "results": {"float32": {
        "status": "extern", "detail": "aoti_torch_cpu_mm_out", "externs": ["aoti_torch_cpu_mm_out"]}}}
    assert loaded["opinfo"]["float32"]["abs"]["status"] == "mismatch"
    assert loaded["opinfo_summary"]["float32"] == {"entries": 3, "by_status": {"mismatch": 1, "extern": 1, "pass": 1},
                                                  "working": 2, "working_pct": 66.67}
    (tmp_path / "old.json").write_text(json.dumps({**loaded, "schema_version": 0}))
    with pytest.raises(ValueError, match="schema_version 0"):
        report_json.load(str(tmp_path / "old.json"))


def test_report_md_groups_failures_by_reason():
    text = report_md.render(_report())
    assert "### compile_error (2)" in text
    assert "- Inductor has no lowering for this op (2 ops; float32): `aten::linalg_inv_ex`, `aten::linalg_svd`" in text
    assert "`aoti_torch_cpu_mm_out` (1)" in text


def test_compare_finds_regressions_and_improvements():
    old = _report()
    records = _records()
    records[("aten::add.Tensor", "float32")]["status"] = "mismatch"     # working -> wrong
    records[("aten::linalg_svd", "float32")]["status"] = "pass"         # failing -> working
    records[("aten::mm", "float32")]["status"] = "aliased"              # working -> working
    diff = compare.compare(old, _report(records))
    assert [(r["op"], r["old"], r["new"]) for r in diff["regressions"]] == [("aten::add.Tensor", "pass", "mismatch")]
    assert [r["op"] for r in diff["improvements"]] == ["aten::linalg_svd"]
    assert [r["op"] for r in diff["changes"]] == ["aten::mm"]
    assert "1 regressions, 1 improvements" in compare.describe(diff)


# ------------------------------------------------------------ the worker pool

class _ExitOnLoad:
    """Unpickling this ends the worker process: a stand-in for a kernel that crashes it."""

    def __reduce__(self):
        return (os._exit, (3,))


@pytest.mark.slow
def test_a_crash_or_a_hang_is_that_ops_result_and_the_run_goes_on(tmp_path):
    crash = {"op": "aten::abs", "dtype": "float32", "calls": [Call("crash", (_ExitOnLoad(),), {})]}
    fine = {"op": "aten::empty.memory_format", "dtype": "float32", "calls": []}
    runner.run_tasks([crash, fine], "eagerc", str(tmp_path), workers=1, timeout=120, progress=False)
    got = runner.load_results(str(tmp_path))
    assert got[("aten::abs", "float32")]["status"] == "crash"
    assert "exit code 3" in got[("aten::abs", "float32")]["detail"]
    assert got[("aten::empty.memory_format", "float32")]["status"] == "runtime"

    slow = {"op": "aten::abs", "dtype": "float64", "calls": [Call("sleep", (_Sleep(),), {})]}
    runner.run_tasks([slow], "eagerc", str(tmp_path), workers=1, timeout=5, progress=False)
    assert runner.load_results(str(tmp_path))[("aten::abs", "float64")]["status"] == "timeout"


def test_a_worker_whose_gpu_context_a_task_broke_is_replaced(tmp_path, monkeypatch):
    # After a device-side assert every later CUDA call of that process fails with it: the
    # task that fired it keeps its record, the next task runs in a fresh worker.
    started = []

    class FakeWorker:
        def __init__(self, module, device, env, log_path):
            started.append(self)

        def start(self, timeout):
            pass

        def ask(self, task, timeout):
            broken = task["op"] == "aten::_linalg_solve_ex"
            detail = "AcceleratorError: CUDA error: device-side assert triggered" if broken else ""
            return {**runner._head(task), "status": "error" if broken else "pass", "detail": detail,
                    "worker": started.index(self)}

        def kill(self):
            return "killed"

        def close(self):
            pass

    monkeypatch.setattr(runner, "WorkerProcess", FakeWorker)
    ops = ["aten::abs", "aten::_linalg_solve_ex", "aten::neg", "aten::exp"]
    runner.run_tasks([{"op": op, "dtype": "float32"} for op in ops], "eagerc", str(tmp_path),
                     workers=1, timeout=10, progress=False)
    got = runner.load_results(str(tmp_path))
    assert [got[(op, "float32")]["worker"] for op in ops] == [0, 0, 1, 1]
    assert got[("aten::_linalg_solve_ex", "float32")]["status"] == "error"
    assert not runner.unusable_context({"detail": "RuntimeError: shapes do not match"})


def test_a_crash_inside_cpu_eager_is_no_sample_not_the_devices():
    task = {"op": "aten::abs", "dtype": "float32"}
    tail = "coverage worker: aten::abs float32 |   schema: CPU eager reference"
    assert runner._crash_record(task, "signal 11", tail)["status"] == "no_sample"
    tail = "coverage worker: aten::abs float32 |   schema: CPU eager reference |   schema: device"
    assert runner._crash_record(task, "signal 11", tail) == {
        **task, "status": "crash", "detail": f"worker died (signal 11): {tail}"}


class _Sleep:
    def __reduce__(self):
        import time

        return (time.sleep, (60,))


# ------------------------------------------------------------------ the sweep

@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("coverage")
    coverage("--device", "eagerc", "--ops", SUBSET, "--dtypes", "float32", "--workers", "2", "--out", str(out))
    return out


@pytest.mark.slow
def test_known_answers_on_the_eagerc_device(sweep):
    report = report_json.load(str(sweep / "report.json"))
    got = {op: entry["results"]["float32"] for op, entry in report["ops"].items()}
    assert {op: r["status"] for op, r in got.items()} == KNOWN
    assert got["aten::mm"]["externs"] == ["aoti_torch_cpu_mm_out"]
    assert got["aten::add.Tensor"]["samples_run"] >= 2 and got["aten::add.Tensor"]["source"].startswith("opinfo:add")
    assert report["summary"]["float32"]["total"] == len(KNOWN)
    assert (sweep / "report.md").read_text().startswith("# Op coverage: device `eagerc`")
    assert (sweep / "report.html").stat().st_size > 5000


@pytest.mark.slow
def test_resume_and_fail_on_regression(sweep, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(sweep, out)
    old = out / "old.json"
    shutil.copy(out / "report.json", old)
    # A later run where add.Tensor broke: its record in results.jsonl says so, and
    # --resume keeps every record (nothing runs again).
    lines = (out / "results.jsonl").read_text().splitlines()
    edited = [json.dumps({**json.loads(ln), "status": "mismatch", "detail": "values: made up"})
              if json.loads(ln)["op"] == "aten::add.Tensor" else ln for ln in lines]
    (out / "results.jsonl").write_text("\n".join(edited) + "\n")
    args = ["--device", "eagerc", "--ops", SUBSET, "--out", str(out), "--resume", "--compare", str(old)]
    proc = coverage(*args, "--fail-on-regression", check_rc=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "0 to run" in proc.stderr
    report = report_json.load(str(out / "report.json"))
    assert [r["op"] for r in report["comparison"]["regressions"]] == ["aten::add.Tensor"]
    assert "### Regressions" in (out / "report.md").read_text()
    assert coverage(*args).returncode == 0   # without --fail-on-regression


# ------------------------------------------------------------ report.html in chromium

def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dump_dom(html_path, fragment="") -> str:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium (tools/setup.sh installs Debian's)")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", html_path.as_uri() + fragment],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_html_renders_draws_the_chart_and_filters(tmp_path):
    html = tmp_path / "report.html"
    html.write_text(report_html.render(_report()))
    assert "http://" not in html.read_text().replace("http://www.w3.org/2000/svg", "")  # no network
    dom = dump_dom(html)
    assert 'data-ready="yes"' in dom                       # the script ran to its end
    assert '<div class="card" id="opinfo-float32"><b>66.67%</b>of 3 OpInfo entries work' in dom
    assert dom.count('class="seg"') >= 6                   # one bar segment per (family, status)
    assert 'data-family="linalg" data-status="compile_error"' in dom
    assert dom.count('<tr class="row"') == 7 and "7 of 7 shown" in dom

    only = dump_dom(html, "#status=compile_error")
    assert only.count('<tr class="row"') == 2 and 'data-op="aten::mm"' not in only
    assert 'data-op="aten::linalg_inv_ex"' in only and "2 of 7 shown" in only

    searched = dump_dom(html, "#q=linalg_s")
    assert searched.count('<tr class="row"') == 1 and 'data-op="aten::linalg_svd"' in searched


@pytest.mark.parametrize("name", ["eagerc.coverage.enumerate", "eagerc.coverage.classify", "eagerc.coverage.check",
                                  "eagerc.coverage.compare", "eagerc.coverage.report_json"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_outputs_must_live_on_the_device_with_its_index():
    from eagerc.coverage.execute import Device

    dev = Device("eagerc")
    assert dev.misplaced((torch.ones(2).to("eagerc"), [torch.zeros(1, device="eagerc")])) == ""
    assert dev.misplaced(torch.ones(2)) == "output 0 on cpu (storage on cpu), expected eagerc:0"


def _eval_batch_norm_call():
    from types import SimpleNamespace

    torch.manual_seed(0)
    args = (torch.randn(3, 2, 4), torch.randn(2), torch.randn(2), torch.randn(2), torch.rand(2) + 0.5,
            False, 0.1, 1e-5)
    return torch.ops.aten.native_batch_norm.default, SimpleNamespace(args=args, kwargs={})


@pytest.mark.parametrize("home", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
def test_outputs_shaped_by_the_memory_homes_convention_are_held_to_its_eager(home):
    # Eval batch norm's saved statistics are empty on CPU and of size C on CUDA: a device on
    # GPU memory keeps CUDA's convention, and only those outputs are taken from CUDA eager.
    from types import SimpleNamespace

    from eagerc.coverage.execute import _home_conventions

    op, call = _eval_batch_norm_call()
    expected = (op(*call.args), [])
    got = _home_conventions(op, call, expected, SimpleNamespace(home=home))
    if home == "cpu":
        assert got is expected
        return
    assert [tuple(t.shape) for t in got[0]] == [(3, 2, 4), (2,), (2,)]
    assert got[0][0] is expected[0][0]  # the result itself: still CPU eager's
    assert all(t.device.type == "cpu" for t in got[0])


@pytest.mark.slow  # imports op_db (about 10 s on a busy 2-core machine)
def test_an_op_selection_finds_the_opinfo_that_reaches_an_op_named_otherwise():
    # torch.histogramdd's OpInfo ("histogramdd") reaches aten::_histogramdd_from_bin_tensors,
    # a name that extends the OpInfo's: a small --ops run still gets its samples.
    from eagerc.coverage.samples import record_opinfo

    plan = record_opinfo(torch.float32, False, wanted={"aten::_histogramdd_from_bin_tensors", "aten::abs"})
    assert plan.calls["aten::_histogramdd_from_bin_tensors"]
    assert all(c.source.startswith("opinfo:histogramdd") for c in plan.calls["aten::_histogramdd_from_bin_tensors"])
    assert plan.calls["aten::abs"]
    # The per-OpInfo table keeps only entries that reach a selected op.
    assert set(plan.opinfo_ops) == {"abs", "histogramdd"}
