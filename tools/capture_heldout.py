"""eagerc.capture and Dynamo side by side on a held-out corpus: model files from public
repositories that nobody here wrote, tried as a new user would (issue 30).

    python tools/capture_heldout.py --fetch --root /tmp/heldout     # extract the checkouts
    python tools/capture_heldout.py --root /tmp/heldout --check      # eager only: do specs run?
    python tools/capture_heldout.py --root /tmp/heldout --mode both --rows rows.jsonl > table.md
    python tools/capture_heldout.py --root /tmp/heldout --only vit,nanogpt -v

The cases (tools/heldout_specs.py) name a repository, a module of it, a constructor call
with small arguments from the repository's README usage, and inputs. `--fetch` extracts the
*.py files of each repository of `heldout_specs.REPOS` into `<root>/<owner>+<name>`, from a
git mirror under `--mirrors` (`<owner>+<name>/repo`, a bare repository) where there is one,
else by `git clone --depth 1` from GitHub. Modules are imported from the checkout (a package
whose `__init__` cannot be imported here, e.g. for torchvision, is stood in for by an empty
package so that its other modules still load; a file path such as
`word_language_model/model` is loaded on its own).

Each case runs through tools/capture_corpus.py's inference harness (no_grad, eval; the first
inputs 8 times, then new values of the same shapes) and tools/capture_train_corpus.py's
training step (train(), dropout zeroed, loss.backward() and SGD, gradients compared), each
against eager on its own copy (same seed): eagerc.capture(backend="eager") and
torch.compile(fullgraph=True, backend="eager"). A file is whole-graph when every case of it is.
"""
import argparse
import collections
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))

import capture_corpus  # noqa: E402
import capture_train_corpus  # noqa: E402
from capture_idioms import Program  # noqa: E402
from heldout_specs import CASES, REPOS  # noqa: E402
import heldout_specs_more  # noqa: E402,F401 - adds its cases to CASES


# -- getting the checkouts ----------------------------------------------------------------------
def fetch(root, mirrors):
    for repo in REPOS:
        dest = os.path.join(root, repo.replace("/", "+"))
        if os.path.isdir(dest):
            continue
        git_dir = os.path.join(mirrors, repo.replace("/", "+"), "repo")
        if not os.path.isdir(git_dir):
            git_dir = os.path.join(root, ".clones", repo.replace("/", "+"))
            if not os.path.isdir(git_dir):
                subprocess.run(["git", "clone", "--bare", "--depth", "1",
                                f"https://github.com/{repo}", git_dir], check=True)
        files = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only",
                                "HEAD"], check=True, capture_output=True, text=True).stdout
        py = [f for f in files.split("\n") if f.endswith(".py")]
        os.makedirs(dest)
        archive = subprocess.run(["git", "--git-dir", git_dir, "archive", "HEAD", "--"] + py,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
        print(f"{repo}: {len(py)} files -> {dest}", file=sys.stderr)


# -- loading a case's module --------------------------------------------------------------------
def load(root, repo, module):
    base = os.path.join(root, repo.replace("/", "+"))
    if "/" in module:  # a script directory's file, loaded under its own name
        path = os.path.join(base, module + ".py")
        name = f"heldout_{repo.replace('/', '_').replace('-', '_')}_{module.replace('/', '_')}"
        if name in sys.modules:
            return sys.modules[name]
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    if base not in sys.path:
        sys.path.insert(0, base)
    parts = module.split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg in sys.modules:
            continue
        try:
            importlib.import_module(pkg)
        except Exception:  # noqa: BLE001 - an __init__ needing what is not installed here
            for k in [k for k in sys.modules if k == pkg or k.startswith(pkg + ".")]:
                del sys.modules[k]
            stub = types.ModuleType(pkg)
            stub.__path__ = [os.path.join(base, *parts[:i])]
            sys.modules[pkg] = stub
    return importlib.import_module(module)


# -- inputs -------------------------------------------------------------------------------------
def make_inputs(descs, seed, new=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for d in descs:
        if d[0] == "randn":
            t = torch.randn(*d[1], generator=g)
            out.append(t + 0.5 if new else t)
        elif d[0] == "ids":
            t = torch.randint(0, d[2], d[1], generator=g)
            out.append((t + 1) % d[2] if new else t)
        elif d[0] == "mask":
            t = torch.rand(*d[1], generator=g) > 0.25
            t[..., 0] = True  # no row fully masked
            out.append(t)
        else:
            out.append(d[1])
    return out


class Call(nn.Module):
    """model.<method>(*tensors, **keywords) with the case's constant arguments bound, as the
    README calls it; a module, so that a stopped call still splits into the model's children."""

    def __init__(self, model, method, consts, names):
        super().__init__()
        self.model, self.method, self.consts, self.names = model, method, consts, names

    def forward(self, *tensors):
        args = list(tensors)
        for i, v in self.consts:
            args.insert(i, v)
        n = len(args) - len(self.names)
        fn = getattr(self.model, self.method) if self.method else self.model
        return fn(*args[:n], **dict(zip(self.names, args[n:])))


def builder(root, c):
    def build():
        M = load(root, c.repo, c.module)
        model = c.build(M).eval()
        consts = [(i, d[1]) for i, d in enumerate(c.inputs) if d[0] == "const"]
        if c.call or c.kw or consts:
            model = Call(model, c.call, consts, list(c.kw))
        tensors = [d for d in c.inputs if d[0] != "const"]
        first = tuple(make_inputs(tensors, 1))
        return Program(model, [first] * 3 + [tuple(make_inputs(tensors, 1, new=True))])
    return build


def check(root, c, timeout):
    """Eager only: does the case build and run?"""
    capture_corpus.signal.signal(capture_corpus.signal.SIGALRM, capture_corpus._alarm)
    capture_corpus.signal.alarm(timeout)
    try:
        torch.manual_seed(0)
        prog = builder(root, c)()
        with torch.no_grad():
            prog.fn(*prog.calls[0])
        return "ok"
    except Exception as e:  # noqa: BLE001 - reported
        return f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"
    finally:
        capture_corpus.signal.alarm(0)


# -- the table ----------------------------------------------------------------------------------
def summary(rows, mode):
    done = [r for r in rows if r["mode"] == mode and "skip" not in r]
    files = collections.defaultdict(list)
    for r in done:
        files[r["file"]].append(r)

    def rate(items, key, per_file):
        n = sum(all(bool(x.get(key)) for x in v) for v in items) if per_file else \
            sum(bool(x.get(key)) for x in items)
        return f"{n}/{len(items)} ({100 * n / max(len(items), 1):.0f}%)"
    fv, cv = list(files.values()), done
    return [f"| {mode}: files whole-graph | {rate(fv, 'capture_whole', 1)} | "
            f"{rate(fv, 'dynamo_whole', 1)} |",
            f"| {mode}: cases whole-graph | {rate(cv, 'capture_whole', 0)} | "
            f"{rate(cv, 'dynamo_whole', 0)} |",
            f"| {mode}: cases equal to eager | {rate(cv, 'capture_equal', 0)} | "
            f"{rate(cv, 'dynamo_equal', 0)} |",
            f"| {mode}: new exceptions | {sum(bool(r.get('capture_new_exc')) for r in cv)} | |",
            f"| {mode}: re-record on an identical call | "
            f"{sum(bool(r.get('rerecord')) for r in cv)} | |"]


def by_repo(rows, modes):
    """Per repository: files, cases, and per mode the cases each tool runs whole."""
    repos = collections.defaultdict(list)
    for r in rows:
        if "skip" not in r:
            repos[r["file"].split("/")[0]].append(r)
    head = "| repository | files | cases |" + "".join(
        f" {m}: capture / Dynamo whole |" for m in modes)
    lines = ["", head, "|---|---|---|" + "---|" * len(modes)]
    for repo, rs in sorted(repos.items()):
        cells = ""
        for m in modes:
            mr = [r for r in rs if r["mode"] == m]
            cells += (f" {sum(bool(r.get('capture_whole')) for r in mr)} / "
                      f"{sum(bool(r.get('dynamo_whole')) for r in mr)} of {len(mr)} |")
        lines.append(f"| {repo} | {len({r['file'] for r in rs})} | "
                     f"{len({r['name'] for r in rs})} |{cells}")
    return lines


def _notable(r):
    return "skip" in r or r.get("rerecord") or not all(
        r.get(k) for k in ("capture_whole", "capture_equal", "dynamo_whole", "dynamo_equal"))


def table(rows, every=False):
    modes = [m for m in ("inference", "training") if any(r["mode"] == m for r in rows)]
    run = [r for r in rows if "skip" not in r]
    lines = [f"cases run: {len(run)} of {len(rows)} (mode x case), files: "
             f"{len({r['file'] for r in run})}", "",
             "| | eagerc.capture | Dynamo (fullgraph, eager backend) |", "|---|---|---|"]
    for m in modes:
        lines += summary(rows, m)
    for m in modes:
        reasons = collections.Counter()
        for r in run:
            if r["mode"] == m:
                reasons.update(r.get("stop_reasons", {}).keys())
        if reasons:
            lines += ["", f"Capture stop reasons ({m}), by cases:", ""]
            lines += [f"- {n} × {k[:160]}" for k, n in reasons.most_common()]
    lines += by_repo(rows, modes)
    lines += ["", "Cases" + ("" if every else " where a tool is not whole-graph or not equal to "
                             "eager, or capture re-records (every other case: both whole and "
                             "equal)") + ":",
              "", "| case | file | mode | capture whole | = eager | Dynamo whole | = eager | "
              "capture stop / Dynamo break |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not every and not _notable(r):
            continue
        if "skip" in r:
            lines.append(f"| {r['name']} | {r['file']} | {r['mode']} | – | – | – | – | "
                         f"skipped: {r['skip'][:100]} |")
            continue
        lines.append(f"| {r['name']} | {r['file']} | {r['mode']} | {capture_corpus.result_cells(r)} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/tmp/heldout", help="directory of the checkouts")
    ap.add_argument("--fetch", action="store_true", help="extract the checkouts, then stop")
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--check", action="store_true", help="eager only: which cases run")
    ap.add_argument("--mode", choices=["inference", "training", "both"], default="both")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per case and mode")
    ap.add_argument("--memory-gb", type=float, default=8)
    ap.add_argument("--rows", default="", help="JSON lines of finished cases (resumes); "
                    "more files after commas are read too")
    ap.add_argument("--table", action="store_true", help="only print the table of --rows")
    ap.add_argument("--all", action="store_true", help="every case in the table")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    if args.fetch:
        return fetch(args.root, args.mirrors)
    capture_corpus.limit_memory(args.memory_gb)
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    cases = [c for c in CASES if not args.only or c.name in args.only.split(",")]
    if args.check:
        for c in cases:
            print(f"{c.name}: {check(args.root, c, args.timeout)}", flush=True)
        return
    done = {}
    for path in [p for p in args.rows.split(",") if os.path.exists(p)]:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                done[(row["mode"], row["name"])] = row
    args.rows = args.rows.split(",")[0]
    modes = ["inference", "training"] if args.mode == "both" else [args.mode]
    rows = []
    for c in cases:
        for mode in modes:
            key = (mode, c.name)
            if key in done or args.table:
                if key in done:
                    rows.append(done[key])
                continue
            if args.rows:  # a case that kills the process is skipped when the run resumes
                with open(args.rows, "a") as f:
                    f.write(json.dumps({"name": c.name, "mode": mode, "file": "",
                                        "skip": "the process died running it"}) + "\n")
            t0 = time.perf_counter()
            run = capture_corpus.run_program if mode == "inference" else \
                capture_train_corpus.run_program
            row = run(c.name, builder(args.root, c), args.timeout)
            row.update(mode=mode, file=f"{c.repo.split('/')[1]}/{c.module}",
                       seconds=round(time.perf_counter() - t0, 1))
            rows.append(row)
            if args.rows:
                with open(args.rows, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
            print(f"# {mode} {c.name}: {row['seconds']}s "
                  f"{ {k: v for k, v in row.items() if k not in ('name', 'mode')} }",
                  file=sys.stderr, flush=True)
    print(table(rows, args.all))


if __name__ == "__main__":
    main()
