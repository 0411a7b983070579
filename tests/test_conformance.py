"""TorchCTS on the eagerc device: tools/conformance.py's accounting, and one small level-1
selection run through TorchCTS (slow; skipped where torchcts is not installed)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import conformance  # noqa: E402

needs_torchcts = pytest.mark.skipif(
    importlib.util.find_spec("torchcts") is None,
    reason="torchcts is not installed (python3 -m pip install --no-deps torchcts==0.4.1)")


def _artifact(statuses, skips, completed=True):
    return {"metadata": {"session_completed": completed},
            "results": {f"t{i}": {"status": s, "error_message": f"boom {i}\n  File x"} for i, s in enumerate(statuses)},
            "skips": {f"s{i}": dict(s) for i, s in enumerate(skips)}}


def test_count_splits_outcomes_and_keeps_other_levels_out():
    artifact = _artifact(
        ["PASS", "PASS", "PASS", "FAIL", "ERROR", "SKIP"],
        [{"semantic_level": 2, "skip_reason": "capability_not_declared"},
         {"semantic_level": 2, "skip_reason": "coverage_strategy_pending"},
         {"semantic_level": 3, "skip_reason": "capability_not_declared"},
         {"semantic_level": 4, "skip_reason": "semantic_level_out_of_range",
          "semantic_skip_reason": "semantic_level_out_of_range"}])
    row = conformance.count(artifact, 2)
    assert row == {"tests": 8, "passed": 3, "failed": 2, "aten_values": 0, "skipped": 1, "declined": 1,
                   "filtered": 1, "pass_rate": 0.6, "eager_rate": 0.6, "complete": True}
    text = conformance.table([{"level": 2, **row}])
    assert "| 2 | 8 | 3 | 2 | 0 | 1 | 1 | 1 | 60.0% | 60.0% |" in text
    assert conformance.failures(artifact) == ["FAIL t3: boom 3", "ERROR t4: boom 4"]


def test_failures_against_references_that_are_not_atens_are_counted_apart():
    artifact = _artifact(["PASS", "FAIL", "FAIL", "ERROR"], [])
    results = artifact["results"]
    results["t1"]["error_message"] = "Permanent contract reference i0_mpmath failed: Tensor-likes are not close!"
    results["t2"]["error_message"] = "Permanent contract reference some_other_ref failed: not close"
    results["t3"]["error_message"] = "Permanent contract reference i0_mpmath failed: raised"
    row = conformance.count(artifact, 1)
    assert (row["failed"], row["aten_values"], row["pass_rate"], row["eager_rate"]) == (3, 1, 0.25, 0.5)
    assert conformance.failures(artifact)[0].startswith("FAIL [ATen's value] t1: ")


def test_failures_of_declined_capabilities_and_listed_tests_are_counted_apart():
    artifact = _artifact(["PASS", "ERROR", "FAIL", "FAIL"], [{"semantic_level": 3, "skip_reason": "oom_not_recoverable"}])
    results = artifact["results"]
    results["t1"]["error_message"] = "Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from the 'Sparseeagerc' backend."
    node = next(iter(conformance.NOT_ATEN_TESTS))
    results[node] = results.pop("t2")
    row = conformance.count(artifact, 3)
    assert (row["passed"], row["failed"], row["aten_values"], row["declined"], row["skipped"]) == (1, 2, 1, 2, 0)
    assert (row["pass_rate"], row["eager_rate"]) == (1 / 3, 2 / 3)
    lines = conformance.failures(artifact)
    assert any(line.startswith("ERROR [declined: sparse] t1: Could not run") for line in lines)
    assert f"FAIL [ATen's value] {node}: boom 2" in lines


def test_table_marks_partial_and_empty_levels():
    row = conformance.count(_artifact([], [], completed=False), 5)
    assert row["pass_rate"] is None
    assert "| 5 (partial) | 0 | 0 | 0 | 0 | 0 | 0 | 0 | n/a | n/a |" in conformance.table([{"level": 5, **row}])


def test_counts_table_splits_declined_from_filtered():
    counts = {"1": {"selected": 5, "skips": {"coverage_strategy_pending": 1}},
              "2": {"selected": 3, "skips": {"capability_not_declared": 2, "dtype_not_listed": 1,
                                             "framework_bug": 4}}}
    text = conformance.counts_table(counts, [1, 2, 3])
    assert "| 1 | 6 | 5 | 0 | 1 |" in text
    assert "| 2 | 10 | 3 | 3 | 4 |" in text
    assert "| 3 | 0 | 0 | 0 | 0 |" in text


def test_parse_levels():
    assert conformance.parse_levels("1-3,5") == [1, 2, 3, 5]
    assert conformance.parse_levels("7") == [7]


def test_manifest_is_valid_for_torchcts():
    schema = pytest.importorskip("torchcts.core.manifest_schema")
    manifest = conformance.load_manifest()
    result = schema.validate_manifest(manifest)
    assert not result.errors, result.errors
    assert manifest["device_name"] == "eagerc"


@needs_torchcts
@pytest.mark.slow
def test_level1_selection_passes(tmp_path):
    """A few level-1 elementwise ops through TorchCTS: every one runs and passes."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "conformance.py"), "--levels", "1",
         "--paths", "generated/test_functional_variants.py", "-k", "abs or absolute or add",
         "--limit", "4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads((tmp_path / "table.json").read_text())
    assert row["passed"] >= 3, row
    assert row["failed"] == 0, (tmp_path / "failures.txt").read_text()


def test_named_tensor_overloads_torch_lacks_are_the_declined_named_tensor():
    record = {"status": "ERROR",
              "error_message": "The underlying op of 'aten.kthvalue' has no overload name 'dimname'"}
    assert conformance.declined_capability(record) == "named_tensor"
    assert conformance.declined_capability({"status": "PASS", "error_message": record["error_message"]}) is None
