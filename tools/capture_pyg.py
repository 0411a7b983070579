"""torch_geometric's models and conv layers under eagerc.capture and Dynamo, side by side, in
inference and in training steps (issue 30: a held-out corpus of GNN code).

    pip install torch-geometric          # 2.8.1, pure Python; no torch_scatter/torch_sparse/
                                         # torch_cluster/pyg_lib needed (cases that need them skip)
    python tools/capture_pyg.py                               # every case, both modes
    python tools/capture_pyg.py --mode infer --only conv_GCNConv,model_GraphUNet -v
    nohup nice python tools/capture_pyg.py --rows /tmp/pyg.jsonl > /tmp/pyg.md 2> /tmp/pyg.log &

Cases (tools/capture_pyg_cases.py): each conv layer of torch_geometric.nn.conv as
conv + relu + conv, each model of torch_geometric.nn.models, and graph-classification stacks
with pooling and readouts, on small random graphs. The comparison is
tools/capture_corpus.py's (inference: eval, no_grad, the first call five times, one with new
values, one on another graph; results equal to eager's, eagerc.testing's model tolerances)
and tools/capture_train_corpus.py's (training: train(), dropout off, a loss and its
backward, SGD between steps outside the call; losses and gradients equal to eager's).
Capture runs with `backend="eager"` (the recorded graph op by op), Dynamo with
`torch.compile(fullgraph=True, backend="eager")`.
"""
import argparse
import collections
import json
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))

import capture_corpus  # noqa: E402
import capture_train_corpus  # noqa: E402

OPTIONAL = ("torch_cluster", "torch_sparse", "torch_scatter", "pyg_lib", "torch_spline_conv",
            "cugraph", "pylibcugraphops")


def _why_skip(row):
    """A skip that is an optional package missing, named as such."""
    skip = row.get("skip", "")
    for pkg in OPTIONAL:
        if pkg in skip or pkg.replace("_", "-") in skip:
            row["skip"] = f"needs {pkg} (not installed)"
    return row


def _diverges(build):
    """A skip row when eager's own training steps reach a non-finite loss (no reference)."""
    try:
        module, calls = capture_train_corpus._build(build)
        steps = capture_train_corpus._train(module, module, calls)
    except Exception:  # noqa: BLE001 - run_program reports it
        return None
    if any(s[0] == "ok" and not torch.isfinite(s[1]).all() for s in steps):
        return {"name": "", "skip": "eager's training steps diverge (non-finite loss)"}
    return None


def run_case(name, build, mode, timeout):
    if mode == "infer":
        row = capture_corpus.run_program(name, build, timeout)
    else:
        row = _diverges(build) or capture_train_corpus.run_program(name, build, timeout)
        if "skip" not in row:  # four identical steps: more than one record is a re-record
            row["rerecord"] = row.get("records", 0) > 1
    row["name"], row["mode"] = name, mode
    return _why_skip(row)


def summary(rows):
    lines = []
    for mode in ("infer", "train"):
        part = [r for r in rows if r["mode"] == mode]
        done = [r for r in part if "skip" not in r]
        n = len(done)
        if not part:
            continue

        def pct(key):
            c = sum(bool(r.get(key)) for r in done)
            return f"{c}/{n} ({100 * c / max(n, 1):.0f}%)"
        lines += [f"**{mode}**: {n} cases run, {len(part) - n} skipped", "",
                  "| | eagerc.capture | Dynamo (fullgraph, eager backend) |", "|---|---|---|",
                  f"| whole-graph | {pct('capture_whole')} | {pct('dynamo_whole')} |",
                  f"| equal to eager | {pct('capture_equal')} | {pct('dynamo_equal')} |",
                  f"| new exceptions | {sum(bool(r.get('capture_new_exc')) for r in done)} | |",
                  f"| re-record on identical calls | {sum(bool(r.get('rerecord')) for r in done)}"
                  " | |", ""]
        only_cap = [r["name"] for r in done if r.get("capture_whole") and not r.get("dynamo_whole")]
        only_dyn = [r["name"] for r in done if r.get("dynamo_whole") and not r.get("capture_whole")]
        lines += [f"Only capture whole ({len(only_cap)}): {', '.join(only_cap) or '-'}", "",
                  f"Only Dynamo whole ({len(only_dyn)}): {', '.join(only_dyn) or '-'}", ""]
        reasons = collections.Counter(k for r in done for k in r.get("stop_reasons", {}))
        lines += ["Capture stop reasons, by cases:", ""] + \
            [f"- {c} × {k[:200]}" for k, c in reasons.most_common()] + [""]
        breaks = collections.Counter((r.get("dynamo_reason") or "")[:110] for r in done
                                     if not r.get("dynamo_whole"))
        lines += ["Dynamo breaks, by cases:", ""] + \
            [f"- {c} × {k}" for k, c in breaks.most_common()] + [""]
        rerec = [f"- {r['name']}: {'; '.join(r.get('guard_failures', {}))[:160] or 'no reason'}"
                 for r in done if r.get("rerecord")]
        lines += ["Re-records on identical calls:", ""] + (rerec or ["- none"]) + [""]
        bad = [f"- {r['name']}: {r.get('capture_new_exc') or 'values differ'}"
               for r in done if not r.get("capture_equal") or r.get("capture_new_exc")]
        lines += ["Capture not equal to eager, or raising:", ""] + (bad or ["- none"]) + [""]
        skips = collections.Counter(r["skip"][:90] for r in part if "skip" in r)
        lines += ["Skipped:", ""] + [f"- {c} × {k}" for k, c in skips.most_common()] + [""]
    return "\n".join(lines)


def details(rows):
    lines = ["| case | mode | capture whole | capture = eager | Dynamo whole | Dynamo = eager | "
             "capture stop / Dynamo break |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skip" in r:
            lines.append(f"| {r['name']} | {r['mode']} | – | – | – | – | skipped: {r['skip'][:80]} |")
            continue
        lines.append(f"| {r['name']} | {r['mode']} | {capture_corpus.result_cells(r)} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["both", "infer", "train"], default="both")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per case and mode")
    ap.add_argument("--memory-gb", type=float, default=8, help="address-space limit")
    ap.add_argument("--rows", default="",
                    help="JSON-lines file: finished cases found there are reused (a run that "
                         "died resumes), new ones appended")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    capture_corpus.limit_memory(args.memory_gb)
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    from capture_pyg_cases import pyg_programs
    progs = pyg_programs()
    if args.only:
        progs = {k: v for k, v in progs.items() if k in args.only.split(",")}
    done = {}
    if args.rows and os.path.exists(args.rows):
        with open(args.rows) as f:
            for line in f:
                row = json.loads(line)
                done[(row["name"], row["mode"])] = row
    modes = ["infer", "train"] if args.mode == "both" else [args.mode]
    rows = []
    for mode in modes:
        for name, build in progs.items():
            if (name, mode) in done:
                rows.append(done[(name, mode)])
                continue
            t0 = time.perf_counter()
            if args.rows:  # a case that kills the process is skipped when the run resumes
                with open(args.rows, "a") as f:
                    f.write(json.dumps({"name": name, "mode": mode,
                                        "skip": "the process died running it"}) + "\n")
            row = run_case(name, build, mode, args.timeout)
            rows.append(row)
            if args.rows:
                with open(args.rows, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
            print(f"# {mode} {name}: {time.perf_counter() - t0:.1f}s "
                  f"{ {k: v for k, v in row.items() if k not in ('name', 'mode')} }",
                  file=sys.stderr, flush=True)
    print(summary(rows))
    print(details(rows))


if __name__ == "__main__":
    main()
