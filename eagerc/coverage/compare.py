"""--compare OLD.json: what got better and what got worse since an earlier report.

Statuses fall in three ranks: working (pass, extern, aliased, host, composite, runtime,
random, not_served), failing (compile_error, unsupported_arg, no_kernel, error, timeout) and
wrong (mismatch, crash). A regression moves an (op, dtype) to a worse rank, an
improvement to a better one; other moves (pass -> extern, anything to or from
decomposed / no_sample) are listed as changes.

    >>> from eagerc.coverage.compare import compare
    >>> old = {"ops": {"aten::abs": {"results": {"float32": {"status": "pass"}}}}}
    >>> new = {"ops": {"aten::abs": {"results": {"float32": {"status": "mismatch"}}}}}
    >>> compare(old, new)["regressions"][0]["new"]
    'mismatch'
"""
from __future__ import annotations

_RANK = {s: 0 for s in ("pass", "extern", "aliased", "host", "composite", "runtime", "random",
                        "not_served")}
_RANK.update({s: 1 for s in ("compile_error", "unsupported_arg", "no_kernel", "error", "timeout")})
_RANK.update({"mismatch": 2, "crash": 2})


def _statuses(report: dict) -> dict:
    return {(op, dtype): record for op, entry in report["ops"].items()
            for dtype, record in entry["results"].items()}


def compare(old: dict, new: dict) -> dict:
    before, after = _statuses(old), _statuses(new)
    out = {"regressions": [], "improvements": [], "changes": [], "missing": [], "new": []}
    for key in sorted(before.keys() | after.keys()):
        op, dtype = key
        if key not in after:
            out["missing"].append({"op": op, "dtype": dtype, "old": before[key]["status"]})
            continue
        if key not in before:
            out["new"].append({"op": op, "dtype": dtype, "new": after[key]["status"]})
            continue
        was, now = before[key]["status"], after[key]["status"]
        if was == now:
            continue
        row = {"op": op, "dtype": dtype, "old": was, "new": now, "detail": after[key].get("detail", "")}
        if was in _RANK and now in _RANK and _RANK[now] != _RANK[was]:
            out["regressions" if _RANK[now] > _RANK[was] else "improvements"].append(row)
        else:
            out["changes"].append(row)
    return out


def describe(diff: dict, limit: int = 50) -> str:
    """Markdown: regressions, improvements and changes, one line each."""
    lines = [f"- {len(diff['regressions'])} regressions, {len(diff['improvements'])} improvements, "
             f"{len(diff['changes'])} other changes, {len(diff['missing'])} missing, {len(diff['new'])} new"]
    for kind in ("regressions", "improvements", "changes"):
        if diff[kind]:
            lines.append(f"\n### {kind.capitalize()}\n")
            for row in diff[kind][:limit]:
                lines.append(f"- `{row['op']}` {row['dtype']}: {row['old']} -> {row['new']}"
                             + (f" ({row['detail'][:120]})" if row.get("detail") else ""))
            if len(diff[kind]) > limit:
                lines.append(f"- ... {len(diff[kind]) - limit} more (compare.json)")
    return "\n".join(lines)
