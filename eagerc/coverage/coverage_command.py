"""The command line: ``python -m eagerc.coverage --device eagerc --out DIR [...]``."""
from __future__ import annotations

import argparse
import json
import os
import sys

from eagerc.coverage import compare as compare_mod
from eagerc.coverage import enumerate as enum
from eagerc.coverage import report_html, report_json, report_md, runner
from eagerc.coverage.classify import ORDER

# eagerc's own device, the override devices, or a vendor's device whose installed package
# `import torch` loads (its torch.backends entry point: docs/vendor.md, "Autoload").
DEVICES = ("eagerc", "cpu", "cuda")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eagerc.coverage", description=__doc__.replace("``", ""))
    p.add_argument("--device", default="eagerc",
                   help=f"{', '.join(DEVICES)}, or a vendor's PrivateUse1 device whose installed "
                   "package torch loads (a torch.backends entry point: --device mydevice)")
    p.add_argument("--ops", default="", help="comma-separated globs of aten overloads "
                   "(e.g. 'aten::add.Tensor,aten::abs*'; 'aten::' is optional; a glob not "
                   "starting with '_' also matches the one-underscore form, so 'softmax*' "
                   "takes aten::_softmax too); default: every overload")
    p.add_argument("--dtypes", default="float32", help="comma-separated, e.g. float32,float16,int64,bool")
    p.add_argument("--grad", action="store_true", help="add backward samples (autograd through OpInfo samples)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per (op, dtype) task")
    p.add_argument("--samples", type=int, default=4, help="samples per (op, dtype)")
    p.add_argument("--out", required=True, help="output folder (results.jsonl, report.*)")
    p.add_argument("--compare", metavar="OLD.json", help="an earlier report.json to compare with")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when --compare finds a regression")
    p.add_argument("--resume", action="store_true", help="keep results.jsonl and skip what it holds")
    p.add_argument("--rerun", default="", metavar="STATUS,...",
                   help="with --resume, run again the (op, dtype) pairs whose last status is one of these")
    p.add_argument("--fresh-cache", action="store_true",
                   help="workers compile into DIR/cache instead of the user's kernel cache")
    p.add_argument("--opinfo-only", action="store_true",
                   help="only the overloads OpInfo samples reach (no schema-sampled ops)")
    p.add_argument("--cluster", metavar="ADDRESS", default=None,
                   help="run the tasks on a Ray cluster instead of local processes: 'auto' (the "
                   "cluster this machine belongs to), 'ray://head:10001', or 'local' (a new one "
                   "here); --workers then caps the tasks in flight. Set EAGERC_REMOTE_CACHE so "
                   "every host shares the kernels (docs/fleet.md)")
    p.add_argument("--vendor", action="store_true",
                   help="report the device as a vendor's accelerator would see it: aliases off "
                        "(EAGERC_ALIAS_FALLBACK=0), and per op what served it (compiled, "
                        "decomposition, extern, host)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from eagerc import _console

    _console.log_to_console()  # progress lines where stderr is no terminal, warnings
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("coverage: --device cuda needs a CUDA GPU; torch sees none", file=sys.stderr)
            return 2
    from eagerc.targets import TargetError, for_device

    try:
        for_device(args.device)
    except TargetError as e:
        print(f"coverage: --device {args.device}: {e}", file=sys.stderr)
        return 2
    if args.vendor:  # the workers inherit it (and a Ray cluster's tasks: EAGERC_* travel)
        os.environ["EAGERC_ALIAS_FALLBACK"] = "0"
    os.makedirs(args.out, exist_ok=True)
    patterns = [p.strip() for p in args.ops.split(",") if p.strip()]
    names = enum.select(patterns, enum.all_overloads())
    if not names:
        print(f"coverage: no aten overload matches {args.ops!r}", file=sys.stderr)
        return 2
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    import torch

    for d in dtypes:
        if not isinstance(getattr(torch, d, None), torch.dtype):
            print(f"coverage: unknown dtype {d!r}", file=sys.stderr)
            return 2
    results_path = os.path.join(args.out, runner.RESULTS)
    if not args.resume and os.path.exists(results_path):
        os.remove(results_path)
    rerun = {s.strip() for s in args.rerun.split(",") if s.strip()}
    done = {k: r for k, r in runner.load_results(args.out).items() if r["status"] not in rerun}
    facts = {n: enum.facts(n) for n in names}
    static, to_run = [], []
    for n in names:
        for d in dtypes:
            if (n, d) in done:
                continue
            record = runner.static_record(facts[n], d)
            (static.append(record) if record else to_run.append((n, d)))
    wanted = {n for n, _ in to_run} | {n for n in names if not facts[n].composite_implicit}
    print(f"coverage: {len(names)} overloads selected; recording OpInfo samples on CPU"
          + (f" (the OpInfo entries named like them)" if patterns else " (every OpInfo entry)"),
          file=sys.stderr, flush=True)
    with _console.heartbeat(lambda: "coverage: recording OpInfo samples on CPU"):
        plans = {d: runner.plan_for(d, args.grad, wanted if patterns else None, args.out, args.samples,
                                    show_progress=not args.quiet)
                 for d in dtypes}
    if args.opinfo_only:
        reached = {n for plan in plans.values() for n in plan.calls} | \
            {n for plan in plans.values() for ops in plan.opinfo_ops.values() for n in ops}
        to_run = [(n, d) for n, d in to_run if n in reached]
        static = []
        facts = {n: f for n, f in facts.items() if n in reached}
    with open(results_path, "a") as f:
        for record in static:
            f.write(json.dumps(record) + "\n")
    tasks = [{"op": n, "dtype": d, "calls": plans[d].calls.get(n, [])[: args.samples]} for n, d in to_run]
    print(f"coverage: {len(names)} overloads x {len(dtypes)} dtypes on {args.device}: {len(static)} decided "
          f"statically, {len(done)} from an earlier run, {len(tasks)} to run on {args.workers} workers",
          file=sys.stderr)
    with _console.heartbeat(lambda: f"coverage: {len(tasks)} tasks on {args.workers} worker processes, "
                                    "still running (each compile is shown as it finishes)"):
        runner.run_tasks(tasks, args.device, args.out, args.workers, args.timeout,
                         fresh_cache=args.fresh_cache, progress=not args.quiet, cluster=args.cluster)
    results = {k: v for k, v in runner.load_results(args.out).items() if k[0] in facts and k[1] in dtypes}
    report = report_json.build(results, plans, device=args.device, dtypes=dtypes, grad=args.grad,
                               vendor=args.vendor,
                               command=["python", "-m", "eagerc.coverage"] + list(argv if argv is not None
                                                                                  else sys.argv[1:]))
    comparison, regressions = None, 0
    if args.compare:
        diff = compare_mod.compare(report_json.load(args.compare), report)
        report["comparison"] = {"against": args.compare, **diff}
        comparison = compare_mod.describe(diff)
        regressions = len(diff["regressions"])
    report_json.write(report, os.path.join(args.out, "report.json"))
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(report_md.render(report, comparison))
    with open(os.path.join(args.out, "report.html"), "w") as f:
        f.write(report_html.render(report))
    for d, s in report["summary"].items():
        print(f"coverage {args.device} {d}: {s['working']}/{s['tested']} tested overloads working "
              f"({s['working_pct']}%); " + ", ".join(f"{k} {s['by_status'][k]}" for k in ORDER
                                                     if k in s["by_status"]))
        if args.vendor:
            print(f"coverage {args.device} {d}, as a vendor sees it: {s['working_without_host']}/{s['tested']} "
                  "work without the host; served by " + ", ".join(f"{k} {n}" for k, n in s["served_by"].items()))
    if comparison:
        print(comparison.splitlines()[0])
    print(f"coverage: wrote {os.path.join(args.out, 'report.html')} (and report.json, report.md)")
    return 1 if args.fail_on_regression and regressions else 0
