"""report.md: the summary numbers, and the non-working ops grouped by reason."""
from __future__ import annotations

import collections
import re

from eagerc.coverage.classify import ORDER, SERVED_BY, WORKING
from eagerc.coverage.report_json import rows


def reason_key(detail: str) -> str:
    """A detail with the specifics (numbers, shapes, sample names) removed, so ops failing
    for one reason group together."""
    text = re.sub(r"\[opinfo:.*|\[schema.*", "", detail or "")
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text.strip()[:160] or "(no detail)"


def grouped_failures(report: dict, statuses=None) -> dict:
    """status -> reason -> [(op, dtype)] for the statuses that are not working (no_sample
    and decomposed are not tested, n/a, so not listed here)."""
    skip = set(WORKING) | {"decomposed", "not_served", "no_sample"}
    statuses = statuses or [s for s in ORDER if s not in skip]
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for op, _, dtype, record in rows(report):
        if record["status"] in statuses:
            groups[record["status"]][reason_key(record.get("detail", ""))].append((op, dtype))
    return groups


def _by_reason(groups: dict) -> list:
    out = []
    for status, reasons in groups.items():
        total = sum(len(v) for v in reasons.values())
        out.append(f"### {status} ({total})\n")
        for reason, items in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            names = sorted({op for op, _ in items})
            dtypes = sorted({d for _, d in items})
            shown = ", ".join(f"`{n}`" for n in names[:40]) + (f" … {len(names) - 40} more" if len(names) > 40 else "")
            out.append(f"- {reason} ({len(names)} ops; {', '.join(dtypes)}): {shown}")
        out.append("")
    return out


def render(report: dict, comparison: str | None = None) -> str:
    out = [f"# Op coverage: device `{report['device']}`", "",
           f"torch {report['torch_version']}, eagerc {report['eagerc_version']}, {report['machine']}; "
           f"dtypes {', '.join(report['dtypes'])}{', with backward samples' if report['grad'] else ''}; "
           f"{report['created']}", "", f"Command: `{' '.join(report['command'])}`", "",
           "## Per ATen overload", "",
           "| dtype | overloads | tested | working | working % | " + " | ".join(ORDER) + " |",
           "|---" * (5 + len(ORDER)) + "|"]
    for dtype, s in report["summary"].items():
        out.append(f"| {dtype} | {s['total']} | {s['tested']} | {s['working']} | {s['working_pct']} | "
                   + " | ".join(str(s["by_status"].get(k, 0)) for k in ORDER) + " |")
    out += ["", "working = " + " + ".join(report["working_statuses"])
            + "; tested = all but decomposed and no_sample.", ""]
    if report.get("vendor_view"):
        out += ["## As a vendor's accelerator sees it (aliases off)", "",
                "| dtype | tested | working without the host | " + " | ".join(SERVED_BY) + " |",
                "|---" * (3 + len(SERVED_BY)) + "|"]
        for dtype, s in report["summary"].items():
            out.append(f"| {dtype} | {s['tested']} | {s['working_without_host']} | "
                       + " | ".join(str(s["served_by"].get(k, 0)) for k in SERVED_BY) + " |")
        host = sorted(op for op, _, _, r in rows(report) if r.get("served_by") == "host")
        extern = sorted(op for op, _, _, r in rows(report) if r.get("served_by") == "extern")
        out += ["", "extern = a vendor library's kernel (a compiled wrapper's C-shim call, or the "
                "code generator's listed extern for a call that could not compile): "
                + (", ".join(f"`{op}`" for op in extern) or "none"), "",
                "host = the host round trip (copied to CPU and back) or ATen's CPU kernel on aliases "
                "(a vendor device needs a kernel or a decomposition to take these off the host): "
                + (", ".join(f"`{op}`" for op in host) or "none"), ""]
    if report.get("opinfo_summary"):
        out += ["## Per OpInfo entry (worst status of the overloads its samples reach)", "",
                "| dtype | entries | working | working % | by status |", "|---|---|---|---|---|"]
        for dtype, s in report["opinfo_summary"].items():
            out.append(f"| {dtype} | {s['entries']} | {s['working']} | {s['working_pct']} | "
                       + ", ".join(f"{k} {v}" for k, v in s["by_status"].items()) + " |")
        out.append("")
        for dtype, entries in report.get("opinfo", {}).items():
            failing = collections.defaultdict(list)
            for entry, e in entries.items():
                if e["status"] not in set(WORKING) | {"not_served", "decomposed", "no_sample"}:
                    failing[e["status"]].append(f"{entry} ({', '.join(o[6:] for o in e['because'])})")
            if failing:
                out += [f"OpInfo entries not working, {dtype} (entry (the overloads that decide it)):", ""]
                out += [f"- {status}: " + "; ".join(sorted(items)) for status, items in
                        sorted(failing.items(), key=lambda kv: ORDER.index(kv[0]))]
                out.append("")
    if comparison:
        out += ["## Compared with the previous report", "", comparison, ""]
    out += ["## Not working, by reason", ""]
    out += _by_reason(grouped_failures(report)) or ["Every tested overload works.", ""]
    untested = grouped_failures(report, ["no_sample"])
    if untested:
        out += ["## Not tested (n/a), by reason", "",
                "No sample could be built, or CPU eager rejected every sample: nothing to compare with.", ""]
        out += _by_reason(untested)
    mismatches = [(op, dtype, r) for op, _, dtype, r in rows(report) if r["status"] == "mismatch"]
    if mismatches:
        out += ["## Mismatches, one by one", ""]
        for op, dtype, r in mismatches:
            worst = r.get("worst") or {}
            err = f"max abs {worst['max_abs']:.3g}, max rel {worst['max_rel']:.3g}, output {worst['output']}; " \
                if worst.get("output") is not None else ""
            out.append(f"- `{op}` {dtype}: {err}{r.get('detail', '')[:400]}")
        out.append("")
    externs = collections.Counter()
    for op, _, dtype, record in rows(report):
        if record["status"] == "extern":
            externs.update(record.get("externs", []))
    if externs:
        out += ["## Extern kernels called by compiled artifacts", "",
                ", ".join(f"`{k}` ({n})" for k, n in externs.most_common()), ""]
    return "\n".join(out)
