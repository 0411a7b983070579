"""Run TorchCTS (the PrivateUse1 conformance suite, ``pip install torchcts``) on the eagerc
device, one semantic level at a time, and write a pass-rate table per level.

    python tools/conformance.py                          # levels 1-7, whole suite
    python tools/conformance.py --levels 1-3 --jobs 16   # pytest-xdist workers
    python tools/conformance.py --levels 2 --paths operators/test_unary.py --limit 200
    python tools/conformance.py --count                  # tests per level, collection only

Each level runs ``python -m torchcts run --device eagerc --level-exact N`` in a scratch
directory (``--out``, default build/conformance) whose ``manifest.py`` loads
eagerc/device/cts_manifest.py, the device's declared dtypes and capabilities. Its counts
come from TorchCTS's own result artifact: passed, failed (FAIL, ERROR, CRASH, TIMEOUT),
skipped (skipped at run time), declined (filtered by the manifest: a capability or dtype
set to False, one device) and filtered (filtered by TorchCTS itself: its pending cases, ops
gated to another device, dtypes the CPU reference does not run). The pass rate is
passed / (passed + failed); "(partial)" marks a level whose run was interrupted. ``--out``/table.md gets the table, ``--out``/failures.txt
each failing node id with its message.

Imported as a pytest plugin (``PYTEST_PLUGINS=conformance``, set by the runner) it
replaces torch.testing's ``extract_test_fn``, which builds ``inspect.stack()`` (source
lines of every frame) for each OpInfo sample: TorchCTS generates samples while collecting,
and this walk of bare frames gives the same answer in a fraction of the time. It also
memoizes one quadratic metadata lookup of TorchCTS's (below). Without both, collecting the
suite took over 20 minutes of one core.

EAGERC_BACKING=cuda in the environment runs the device on GPU memory; EAGERC_CACHE_DIR
keeps the compiled kernels between runs.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "eagerc" / "device" / "cts_manifest.py"
FAILED = ("FAIL", "ERROR", "CRASH", "TIMEOUT", "XPASS_STRICT")
# Skip reasons that come from the manifest (what the device declines).
MANIFEST_DECLINES = ("capability_not_declared", "dtype_not_listed", "device_count",
                     "resource_limit", "op_excluded", "container_format_not_supported",
                     "oom_not_recoverable")
# TorchCTS files tests of other levels under these reasons: not part of this level.
OTHER_LEVEL = ("semantic_level_out_of_range", "semantic_level_gt_requested")
# TorchCTS's contract references whose values are not ATen's own CPU values on the inputs
# it generates; tests/test_conformance_fixes.py checks that the device's values there are
# CPU eager's (docs/conformance.md, Failures). The manifest leaves the NaN/Inf inputs of the
# ops they serve out of its IEEE754 claim (cts_manifest.IEEE754_ATEN_NOT_CONTRACT); a
# failure against one of them that still runs counts as "ATen's value", not as the device's
# error.
NOT_ATEN_REFERENCES = {
    "i0_mpmath": "mpmath's i0(±inf) = inf; ATen's CPU kernel gives NaN",
    "complex_tensor_integer_power": "exact integer powers per lane; ATen's complex pow takes its general path (inf+nanj)",
    "complex_ldexp_integral_lane_scale": "exact exponent scaling per lane; ATen multiplies by 2**e as a complex",
    "complex_unit_alpha_add_sub": "parts added separately; ATen multiplies by alpha = 1+0j (inf+0j -> inf+nanj)",
    "lanczos3_exact_zero": "TorchCTS's own Lanczos weights; the device runs ATen's CPU _upsample_lanczos2d_aa "
                           "(Inductor has no lowering), NaN/inf inputs alike",
    "bce_with_logits_stable": "inf for logits of both infinities; ATen's CPU kernel gives NaN, the device "
                              "alike (tests/test_conformance_fixes.py)",
}
# Tests, by node id, whose failure is ATen's own CPU behaviour where the message names no
# reference (docs/conformance.md, Failures, says how each was checked).
_GRU_WORKSPACE = ("TorchCTS expects a (B, 6H) workspace; ATen's fused GRU cell (CUDA's, XPU's: "
                  "GRU_WORKSPACE_MULTIPLIER 5) returns (B, 5H), [r | z | n | hx | hn], as the device's does "
                  "(compile/accelerator/rnn_cells.py) and its backward reads")
NOT_ATEN_TESTS = {
    "autograd/test_backward.py::test_embedding_bag_scale_grad_by_frequency_contract":
        "TorchCTS's embedding_bag_scale_grad_by_freq_reference divides each row's gradient by its count; "
        "ATen's CPU backward divides by other counts (row 4, seen once, by 3): the device's values are "
        "CPU eager's (tests/test_conformance_fixes.py)",
    "rng/test_dropout_rrelu_variants.py::test_rrelu_train_false_variants":
        "compares the noise rrelu_with_noise_functional returns as given (eval mode) on each side, "
        "two torch.empty_like tensors never written: the device returns its own as ATen does",
    **{f"generated/{test}[_thnn_fused_gru_cell{form}]": _GRU_WORKSPACE
       for test, form in (("test_oracle_surfaces.py::test_oracle_surface", "[L2]"),
                          ("test_functional_variants.py::test_generated_functional_variant", "[L2]"),
                          ("test_oracle_surfaces.py::test_oracle_surface", ".out[L3]"),
                          ("test_out_variants.py::test_generated_out_variant", ".out[L3]"))},
}
# A failure whose message says that the dispatch key of a capability the manifest declines
# has no kernel: a test that uses the capability without TorchCTS gating it by the
# capability (no `requires` marker). Counted with the declined tests, not the failed ones.
DECLINED_IN_MESSAGE = {
    "with arguments from the 'Sparseeagerc' backend": "sparse",
    "with arguments from the 'SparseCsreagerc' backend": "sparse",
    "with arguments from the 'NestedTensoreagerc' backend": "nested",
    "with arguments from the 'Quantizedeagerc' backend": "native_quantization",
    # Named-tensor overloads (kthvalue.dimname, max.names_dim, ...): torch 2.13 has none.
    "has no overload name 'dimname": "named_tensor",
    "has no overload name 'names_": "named_tensor",
}


# --- pytest plugin ---------------------------------------------------------------------

def pytest_configure(config):
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    from eagerc.unittest_frames import running_unittest_fn

    common_utils.extract_test_fn = running_unittest_fn
    core.extract_test_fn = running_unittest_fn
    _memoize_validation_metadata()


def _torchcts_conftest(config):
    """TorchCTS's conftest module (its collection filter and skip records)."""
    for plugin in config.pluginmanager.get_plugins():
        if hasattr(plugin, "_semantic_level_for_item") and hasattr(plugin, "_SESSION_SKIPS"):
            return plugin
    raise RuntimeError("TorchCTS's conftest is not loaded")


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """With CONFORMANCE_COUNTS=path (``--count``), write per level the tests TorchCTS keeps
    to run and those it filters (by reason), after its own collection filter."""
    yield
    path = os.environ.get("CONFORMANCE_COUNTS")
    if not path:
        return
    cts = _torchcts_conftest(config)
    counts: dict = {}
    for item in items:
        level = cts._semantic_level_for_item(item)["semantic_level"]
        counts.setdefault(level, {"selected": 0, "skips": {}})["selected"] += 1
    for record in cts._SESSION_SKIPS.values():
        if record.get("semantic_skip_reason") in OTHER_LEVEL:
            continue
        skips = counts.setdefault(record.get("semantic_level"), {"selected": 0, "skips": {}})["skips"]
        skips[record.get("skip_reason")] = skips.get(record.get("skip_reason"), 0) + 1
    Path(path).write_text(json.dumps({str(k): v for k, v in sorted(counts.items(), key=str)}, indent=1))


def _memoize_validation_metadata():
    """TorchCTS's op_metadata._validation_metadata scans every op's versions on each
    lookup of one op's schema (quadratic over collection); its answer only depends on the
    metadata it is given, so it is computed once per metadata object."""
    from torchcts import op_metadata

    compute = op_metadata._validation_metadata
    memo: dict = {}

    def validation_metadata(metadata=None):
        data = metadata if metadata is not None else op_metadata.load_op_metadata()
        if id(data) not in memo:
            memo[id(data)] = (data, compute(data))
        return memo[id(data)][1]

    op_metadata._validation_metadata = validation_metadata


# --- runner ----------------------------------------------------------------------------

def load_manifest() -> dict:
    """The eagerc device's TorchCTS manifest (eagerc/device/cts_manifest.py)."""
    import runpy

    return runpy.run_path(str(MANIFEST))["manifest"]


def parse_levels(text: str) -> list[int]:
    """'1-3,5' -> [1, 2, 3, 5]"""
    levels = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        levels.extend(range(int(lo), int(hi or lo) + 1))
    return levels


def _load_artifact(results_dir: Path) -> dict:
    from torchcts.core.result_artifacts import load_result_artifact

    # A finished run's artifact is under *_history; an interrupted one left only *_latest.
    runs = sorted(glob.glob(str(results_dir / "*_history" / "*.json")))
    runs = runs or glob.glob(str(results_dir / "*_latest.json"))
    if not runs:
        raise RuntimeError(f"TorchCTS wrote no result artifact under {results_dir}")
    return load_result_artifact(runs[-1])


def _message(record: dict) -> str:
    return str(record.get("error_message") or record.get("message") or "")


def aten_value_failure(record: dict, node: str = "") -> bool:
    """A failure against one of NOT_ATEN_REFERENCES (TorchCTS's reference, not ATen's), or
    of a test in NOT_ATEN_TESTS."""
    if record.get("status") not in FAILED:
        return False
    if node in NOT_ATEN_TESTS:
        return True
    message = _message(record)
    prefix = "Permanent contract reference "
    return (record.get("status") == "FAIL" and message.startswith(prefix)
            and message[len(prefix):].split(" ", 1)[0] in NOT_ATEN_REFERENCES)


def declined_capability(record: dict) -> str | None:
    """The declined capability a failure ran into (DECLINED_IN_MESSAGE), or None."""
    if record.get("status") not in FAILED:
        return None
    message = _message(record)
    return next((cap for text, cap in DECLINED_IN_MESSAGE.items() if text in message), None)


def count(artifact: dict, level: int) -> dict:
    """Counts of one level's run from TorchCTS's result artifact."""
    results = artifact.get("results", {})
    status = [r.get("status", "") for r in results.values()]
    reasons = [s.get("skip_reason") for s in artifact.get("skips", {}).values()
               if s.get("semantic_level") == level and s.get("semantic_skip_reason") not in OTHER_LEVEL]
    declined_at_run = sum(declined_capability(r) is not None for r in results.values())
    declined = sum(r in MANIFEST_DECLINES for r in reasons) + declined_at_run
    passed = sum(s == "PASS" for s in status)
    failed = sum(s in FAILED for s in status) - declined_at_run
    runnable = passed + failed
    aten_values = sum(aten_value_failure(r, node) and declined_capability(r) is None
                      for node, r in results.items())
    return {"tests": len(status) + len(reasons), "passed": passed, "failed": failed,
            "aten_values": aten_values,
            "skipped": len(status) - runnable - declined_at_run, "declined": declined,
            "filtered": len(reasons) - (declined - declined_at_run),
            "pass_rate": passed / runnable if runnable else None,
            "eager_rate": (passed + aten_values) / runnable if runnable else None,
            "complete": bool(artifact.get("metadata", {}).get("session_completed"))}


def failures(artifact: dict) -> list[str]:
    lines = []
    for node, record in sorted(artifact.get("results", {}).items()):
        if record.get("status") in FAILED:
            message = _message(record)
            capability = declined_capability(record)
            tag = (f" [declined: {capability}]" if capability
                   else " [ATen's value]" if aten_value_failure(record, node) else "")
            lines.append(f"{record['status']}{tag} {node}: {message.splitlines()[0] if message else ''}")
    return lines


def _torchcts_env() -> dict:
    # Run from inside a pytest-xdist worker (tests/test_conformance.py), the worker's own
    # variables (PYTEST_XDIST_WORKER, ...) made TorchCTS's pytest act as a worker and write
    # no result artifact: TorchCTS's run starts from a clean pytest environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
    env["PYTEST_PLUGINS"] = "conformance"
    env.setdefault("TORCHCTS_NON_INTERACTIVE", "1")
    return env


def _torchcts_command(level_args: list[str], args, results_dir: Path) -> list[str]:
    import torchcts

    package = Path(torchcts.__file__).parent
    cmd = [sys.executable, "-m", "torchcts", "run", "--device", "eagerc", *level_args,
           "--non-interactive", "--results-dir", str(results_dir),
           "--rootdir", str(package), "--adaptive-isolation", "off", "-q", "-rN"]
    if args.k:
        cmd += ["-k", args.k]
    return cmd + [str(package / p) for p in args.paths]


def run_level(level: int, args, workdir: Path) -> dict:
    results_dir = workdir / f"level{level}"
    cmd = _torchcts_command(["--level-exact", str(level)], args, results_dir)
    if args.jobs > 1:
        cmd += ["-n", str(args.jobs)]
    if args.limit:
        cmd += ["--limit-selected", str(args.limit)]
    if args.test_timeout and importlib.util.find_spec("pytest_timeout"):
        cmd += ["--timeout", str(args.test_timeout)]
    start = time.monotonic()
    with open(workdir / f"level{level}.log", "w") as log:
        subprocess.run(cmd, cwd=workdir, env=_torchcts_env(), stdout=log, stderr=subprocess.STDOUT, check=False)
    artifact = _load_artifact(results_dir)
    row = {"level": level, **count(artifact, level), "seconds": round(time.monotonic() - start)}
    with open(workdir / "failures.txt", "a") as out:
        out.writelines(f"L{level} {line}\n" for line in failures(artifact))
    return row


def collect_counts(levels: list[int], args, workdir: Path) -> dict:
    """Collection only (nothing runs): per level, how many tests TorchCTS keeps to run
    ("selected") and how many it filters, by reason ("skips")."""
    counts_file = workdir / "counts.json"
    cmd = _torchcts_command(["--level-range", f"{min(levels)}:{max(levels)}"], args,
                            workdir / "collect") + ["--collect-only"]
    env = {**_torchcts_env(), "CONFORMANCE_COUNTS": str(counts_file)}
    with open(workdir / "collect.log", "w") as log:
        subprocess.run(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return json.loads(counts_file.read_text())


def counts_table(counts: dict, levels: list[int]) -> str:
    """The collected counts as the table's tests, declined and filtered columns."""
    lines = ["| level | tests | to run | declined | filtered |", "|---:|---:|---:|---:|---:|"]
    for level in levels:
        entry = counts.get(str(level), {"selected": 0, "skips": {}})
        declined = sum(n for r, n in entry["skips"].items() if r in MANIFEST_DECLINES)
        filtered = sum(entry["skips"].values()) - declined
        lines.append(f"| {level} | {entry['selected'] + declined + filtered} | {entry['selected']} | "
                     f"{declined} | {filtered} |")
    return "\n".join(lines) + "\n"


def table(rows: list[dict]) -> str:
    lines = ["| level | tests | passed | failed | of which ATen's value | skipped | declined | filtered "
             "| pass rate | with ATen's values |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def percent(rate):
        return "n/a" if rate is None else f"{100 * rate:.1f}%"

    for r in rows:
        level = r["level"] if r["complete"] else f"{r['level']} (partial)"
        lines.append(f"| {level} | {r['tests']} | {r['passed']} | {r['failed']} | {r['aten_values']} | "
                     f"{r['skipped']} | {r['declined']} | {r['filtered']} | {percent(r['pass_rate'])} | "
                     f"{percent(r['eager_rate'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1-7", help="levels to run, e.g. 1-7 or 1,3 (default 1-7)")
    parser.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers (default 1)")
    parser.add_argument("--paths", nargs="*", default=[],
                        help="TorchCTS test paths relative to its package (default: all suites)")
    parser.add_argument("--limit", type=int, help="run at most this many selected tests per level")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--test-timeout", type=int, default=900, help="seconds per test (pytest-timeout)")
    parser.add_argument("--out", default=str(REPO / "build" / "conformance"))
    parser.add_argument("--min-rate", type=float, default=0.99,
                        help="exit 1 when a level's pass rate is below this (default 0.99)")
    parser.add_argument("--count", action="store_true",
                        help="collection only: count each level's tests (runs nothing)")
    args = parser.parse_args(argv)
    try:
        import torchcts  # noqa: F401
    except ImportError:
        print("torchcts is not installed: python3 -m pip install --no-deps torchcts==0.4.1")
        return 2
    workdir = Path(args.out)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "manifest.py").write_text(
        f"import runpy\nmanifest = runpy.run_path({str(MANIFEST)!r})['manifest']\n")
    if args.count:
        levels = parse_levels(args.levels)
        text = counts_table(collect_counts(levels, args, workdir), levels)
        (workdir / "counts.md").write_text(text)
        print(text)
        return 0
    (workdir / "failures.txt").write_text("")
    rows = []
    for level in parse_levels(args.levels):
        rows.append(run_level(level, args, workdir))
        print(table(rows[-1:]).splitlines()[-1], f"({rows[-1]['seconds']} s)", flush=True)
    text = table(rows)
    (workdir / "table.md").write_text(text)
    (workdir / "table.json").write_text(json.dumps(rows, indent=1))
    print(text)
    low = [r for r in rows if r["pass_rate"] is not None and r["pass_rate"] < args.min_rate]
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
