"""report.json: the versioned result of a sweep (schema in docs/coverage.md).

    >>> from eagerc.coverage.report_json import SCHEMA_VERSION
    >>> SCHEMA_VERSION
    1
"""
from __future__ import annotations

import collections
import datetime
import json
import os
import platform

import torch

from eagerc._version import __version__
from eagerc.coverage.classify import ORDER, SERVED_BY, WORKING, accelerator_decomposed_ops, served_by, worst
from eagerc.coverage.enumerate import family

SCHEMA_VERSION = 1

STATUS_MEANINGS = {
    "pass": "compiled to generated code; every sample matches CPU eager (eagerc.testing tolerances)",
    "extern": "compiled and matches, but the artifact calls an ATen/vendor kernel (named in detail)",
    "aliased": "matches; ATen's CPU kernel ran on zero-copy aliases of the device's memory",
    "host": "matches; not compiled, it ran through the host round trip (inputs copied to CPU, "
            "ATen's CPU kernel, results copied back; why in detail)",
    "composite": "matches; not compiled itself, its CompositeExplicitAutograd kernel ran on ops "
                 "the device serves (why it was not compiled in detail)",
    "runtime": "matches; served by the device's hand-written runtime (allocation, copies, views, .item())",
    "random": "a random op: compiled; shapes, dtypes and statistics match CPU eager's draw (values are not compared)",
    "mismatch": "ran, but a sample differs from CPU eager (worst error and sample in detail)",
    "error": "CPU eager accepted a sample, the device raised (first line); or the tool could not "
             "check the result ('coverage could not check it: ...')",
    "compile_error": "eagerc could not compile it (first line of the reason); it ran on CPU instead",
    "unsupported_arg": "eagerc does not serve it: an argument or return kind it cannot compile (which)",
    "no_kernel": "the device has no kernel and eagerc does not serve it (why)",
    "not_served": "override mode: eagerc leaves the op to the device's own kernel by design (why)",
    "decomposed": "CompositeImplicitAutograd: decomposes into other ops before reaching any device",
    "no_sample": "no sample could be built or CPU eager rejected every sample (why)",
    "crash": "the worker process died on it (exit status, last log lines)",
    "timeout": "no answer within the per-op timeout",
}
assert set(STATUS_MEANINGS) == set(ORDER)


def _summary(records: list) -> dict:
    counts = collections.Counter(r["status"] for r in records)
    tested = sum(n for s, n in counts.items() if s not in ("decomposed", "no_sample"))
    working = sum(counts[s] for s in WORKING)
    return {"total": len(records), "by_status": {s: counts[s] for s in ORDER if counts[s]},
            "tested": tested, "working": working,
            "working_pct": round(100.0 * working / tested, 2) if tested else None}


def _opinfo(plan, results: dict, dtype: str) -> dict:
    """Each OpInfo entry: the worst status over the overloads its samples reached."""
    entries = {}
    for entry, ops in sorted(plan.opinfo_ops.items()):
        statuses = [(results[(op, dtype)]["status"], op) for op in ops if (op, dtype) in results]
        if len(statuses) < len(ops):
            continue  # some reached overloads were not in this run's selection
        relevant = [(s, op) for s, op in statuses if s not in ("no_sample", "decomposed")] or statuses
        status = worst([s for s, _ in relevant])
        entries[entry] = {"status": status, "because": sorted(op for s, op in relevant if s == status)}
    return entries


def _served_summary(records: list) -> dict:
    """The vendor's view of one dtype: what served each tested overload, and how many work
    without the host (neither the host round trip nor aliases)."""
    counts = collections.Counter(r["served_by"] for r in records if r.get("served_by"))
    return {"served_by": {k: counts[k] for k in SERVED_BY if counts[k]},
            "working_without_host": sum(1 for r in records if r["status"] in WORKING
                                        and r.get("served_by") not in ("host", None))}


def build(results: dict, plans: dict, *, device: str, dtypes: list, grad: bool, command: list,
          vendor: bool = False) -> dict:
    """`vendor`: the sweep ran as a vendor's accelerator would (aliases off); each record
    then says what served it (classify.served_by) and the summary counts them."""
    decomposed = accelerator_decomposed_ops(device) if vendor else frozenset()
    ops = collections.defaultdict(lambda: {"family": None, "results": {}})
    for (op, dtype), record in sorted(results.items()):
        entry = ops[op]
        entry["family"] = family(op)
        entry["results"][dtype] = {k: v for k, v in record.items() if k not in ("op", "dtype")}
        if vendor:
            entry["results"][dtype]["served_by"] = served_by(record["status"], op, record.get("externs") or (),
                                                             decomposed)
    summary = {d: _summary([r for (op, dt), r in results.items() if dt == d]) for d in dtypes}
    if vendor:
        for d in dtypes:
            summary[d].update(_served_summary([e["results"][d] for e in ops.values() if d in e["results"]]))
    opinfo = {d: _opinfo(plans[d], results, d) for d in dtypes if d in plans}
    opinfo_summary = {}
    for d, entries in opinfo.items():
        counts = collections.Counter(e["status"] for e in entries.values())
        working = sum(counts[s] for s in WORKING + ("not_served",))
        opinfo_summary[d] = {"entries": len(entries), "by_status": {s: counts[s] for s in ORDER if counts[s]},
                             "working": working,
                             "working_pct": round(100.0 * working / len(entries), 2) if entries else None}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "eagerc.coverage",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "eagerc_version": __version__,
        "torch_version": torch.__version__,
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "device": device,
        "dtypes": dtypes,
        "grad": grad,
        "vendor_view": vendor,
        "statuses": STATUS_MEANINGS,
        "working_statuses": list(WORKING),
        "summary": summary,
        "opinfo_summary": opinfo_summary,
        "ops": dict(ops),
        "opinfo": opinfo,
    }


def write(report: dict, path: str) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(path + ".tmp", path)


def load(path: str) -> dict:
    with open(path) as f:
        report = json.load(f)
    version = report.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: report schema_version {version}, this tool reads {SCHEMA_VERSION}; "
                         "re-run the old sweep with this version to compare")
    return report


def rows(report: dict):
    """(op, family, dtype, record) for every result, sorted by op."""
    for op, entry in sorted(report["ops"].items()):
        for dtype, record in entry["results"].items():
            yield op, entry["family"], dtype, record
