"""eagerc.capture and Dynamo side by side on a long-tail corpus: the nn.Module classes of
model files from many small public research repositories (issue 47).

    python tools/capture_longtail.py extract                 # copy the files from the snapshots
    python tools/capture_longtail.py probe --rows /tmp/probe.jsonl    # eager: build, inputs
    python tools/capture_longtail.py run --probe /tmp/probe.jsonl --rows /tmp/lt.jsonl > t.md
    python tools/capture_longtail.py save --probe /tmp/probe.jsonl   # the probe into the manifest
    python tools/capture_longtail.py run --probe none --rows /tmp/lt.jsonl    # the manifest's classes
    python tools/capture_longtail.py table --probe /tmp/probe.jsonl --rows /tmp/lt.jsonl
    python tools/capture_longtail.py run --only pygcn,MADE -v     # files or classes matching

tools/longtail_corpus/MANIFEST.json names, per file: repository, commit, path, license,
the repository's other files it imports (`support`), and per class where inference fails a
constructor (a Python expression evaluated in the file's namespace) and inputs
(tools/capture_heldout.make_inputs' specs: ["randn", shape], ["ids", shape, vocab],
["mask", shape], ["const", value]; plus ["adj", n]: a dense row-normalised adjacency), an
optional method to call, or "skip" with the reason. `extract` copies the files from git
snapshots under --mirrors (`<owner>+<name>/repo`) into
tools/longtail_corpus/<owner>__<name>/<path>; the copies are not committed (only the manifest
is), and a file that is absent is skipped.

`probe` imports each file in a subprocess (a top-level import of a package not installed
here is stood in for by a stub module, so that the file's other classes still load), finds
the nn.Module classes the file defines, builds each with the manifest's constructor or with
arguments inferred from the signature (names: channels/dim -> 16, heads -> 4, layers -> 2,
classes -> 10, dropout -> 0, ...), and inputs from the manifest or inferred from the first
layer (Conv2d(c) -> (2, c, s, s), Linear(f) -> (2, f) or (2, 8, f), Embedding(n) -> ids,
...; a forward of k tensors gets k of the same shape), keeping the first that runs in eager.

`run` takes the probe's classes and runs each, in a subprocess per file, through
tools/capture_corpus.py's inference harness (eval, no_grad: two identical calls, then new
values of the same shapes) and tools/capture_train_corpus.py's training steps (train(),
dropout zeroed, loss of the outputs, backward, SGD, gradients compared): eager on its own
copy (same seed), eagerc.capture(backend="eager") and torch.compile(fullgraph=True,
backend="eager"). Whole-graph strictly, for both tools: capture with no stop, no eager run
and one graph for the calls (inference: one graph for all three calls; training: one
training graph); Dynamo with no graph break and one graph compiled (its `unique_graphs`
counter: a recompile counts, as a second record does). A module that sets state on its first
call (ActNorm's data-dependent init: `if not self.initialized: ...`) records twice under
capture and compiles twice under Dynamo: strict for neither, whole-graph for both.
"""
import argparse
import collections
import importlib
import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import types
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "longtail_corpus")
MANIFEST = os.path.join(CORPUS, "MANIFEST.json")
sys.path.insert(0, HERE)

import capture_corpus  # noqa: E402
import capture_train_corpus  # noqa: E402
from capture_heldout import Call, make_inputs  # noqa: E402
from capture_idioms import Program  # noqa: E402


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)["entries"]


def file_key(e):
    return f"{e['repo'].replace('/', '__')}/{e['path']}"


# -- extract ------------------------------------------------------------------------------------
def extract(mirrors):
    for e in load_manifest():
        git_dir = os.path.join(mirrors, e["repo"].replace("/", "+"), "repo")
        if os.path.isdir(os.path.join(git_dir, ".git")):
            git_dir = os.path.join(git_dir, ".git")
        for path in [e["path"]] + e.get("support", []):
            dest = os.path.join(CORPUS, e["repo"].replace("/", "__"), path)
            if os.path.exists(dest):
                continue
            got = subprocess.run(["git", "--git-dir", git_dir, "show", f"{e['commit']}:{path}"],
                                 capture_output=True)
            if got.returncode:
                print(f"{e['repo']}: {path}: {got.stderr.decode().strip()[:120]}", file=sys.stderr)
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(got.stdout)


# -- importing a file ---------------------------------------------------------------------------
class _Missing:
    """Stands in for whatever a stubbed package is asked for (its calls too); fails where a
    value is needed."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, k):
        if k.startswith("__"):  # no __file__, __spec__ ...: module scans skip it
            raise AttributeError(k)
        return _Missing(f"{self._name}.{k}")

    def __call__(self, *a, **k):
        return _Missing(f"{self._name}()")

    def __mro_entries__(self, bases):
        return (object,)


def _no_attribute(k):
    raise AttributeError(k)


def _stub(name):
    mod = types.ModuleType(name)
    mod.__path__ = []
    mod.__getattr__ = lambda k: _Missing(f"{name}.{k}") if not k.startswith("__") else \
        _no_attribute(k)
    sys.modules[name] = mod
    return mod


def import_file(e):
    """The file's module, imported under its dotted path from the repository's root (the root
    and the file's directory on sys.path), with `stubbed`: packages stood in for."""
    root = os.path.join(CORPUS, e["repo"].replace("/", "__"))
    path = os.path.join(root, e["path"])
    for d in (os.path.dirname(path), root):
        if d not in sys.path:
            sys.path.insert(0, d)
    name = e["path"][:-3].replace("/", ".").replace("-", "_")
    sys.argv = [path]  # a script that parses arguments at import sees none
    stubbed = []
    dotted = all(part.isidentifier() for part in e["path"][:-3].split("/"))  # (vip-mlp.py: no)
    for _ in range(8):
        before = set(sys.modules)
        try:
            if dotted:  # through its packages: an __init__ that imports the file comes first
                mod = importlib.import_module(name)
            else:
                spec = importlib.util.spec_from_file_location(name, path)
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
            mod.__stubbed__ = stubbed
            return mod
        except ModuleNotFoundError as ex:
            for k in set(sys.modules) - before:  # retried from scratch, with the stub
                if not isinstance(sys.modules[k], types.ModuleType) or \
                        getattr(sys.modules[k], "__file__", "") and \
                        sys.modules[k].__file__.startswith(root):
                    del sys.modules[k]
            missing = ex.name or ""
            top = missing.split(".")[0]
            if not top or os.path.exists(os.path.join(root, top)) or \
                    os.path.exists(os.path.join(root, top + ".py")) or missing in stubbed:
                raise
            parts = missing.split(".")
            for i in range(1, len(parts) + 1):
                if ".".join(parts[:i]) not in sys.modules:
                    _stub(".".join(parts[:i]))
            stubbed.append(missing)
    raise ImportError(f"too many missing packages: {stubbed}")


def classes_of(mod):
    out = []
    for k, v in vars(mod).items():
        if isinstance(v, type) and issubclass(v, nn.Module) and v.__module__ == mod.__name__ \
                and not inspect.isabstract(v):
            out.append(k)
    return out


# -- inferring constructor arguments and inputs -------------------------------------------------
_NAME_VALUES = [  # (substrings of a parameter's name, value), first match wins
    (("drop", "dropout", "p_drop"), 0.0), (("eps",), 1e-5), (("alpha", "slope"), 0.2),
    (("max_action",), 1.0), (("scale", "temperature", "tau", "gamma", "beta", "lr", "sigma"), 1.0),
    (("head",), 4), (("kernel",), 3), (("stride",), 1), (("padding", "pad"), 1),
    (("dilation",), 1), (("group",), 4), (("reduction", "ratio"), 4),
    (("class", "n_out", "nclass", "num_out", "output_size", "out_dim", "action"), 4),
    (("layer", "depth", "block", "n_res", "num_res", "stack", "level", "n_flow", "n_block"), 2),
    (("vocab", "ntoken", "n_token", "num_embed", "n_src_vocab", "n_trg_vocab"), 50),
    (("seq", "len", "max_len", "n_position", "block_size", "length", "window", "n_tokens"), 16),
    (("img_size", "image_size", "resolution", "img_shape", "h", "w", "height", "width"), 32),
    (("patch",), 4), (("latent", "z_dim", "code"), 8),
    (("state", "num_inputs", "obs", "input"), 8),
    (("is_", "use_", "bias", "affine", "norm", "causal", "bidirectional", "batch_first"), None),
]


def guess(param):
    n = param.name.lower()
    if param.annotation is bool:
        return False
    for keys, v in _NAME_VALUES:
        if any(k in n for k in keys):
            if v is None:
                break
            return v
    return 16


def ctor_candidates(cls):
    """Keyword-argument dicts to try for a class without a manifest constructor."""
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return [{}]
    need = [p for p in list(sig.parameters.values())[1:]
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not need:
        return [{}]
    first = {p.name: guess(p) for p in need}
    return [first, {p.name: (16 if isinstance(v, int) else v) for p, v in zip(need, first.values())},
            {p.name: 8 for p in need}]


def _first_layer(model):
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                          nn.Linear, nn.Embedding, nn.RNNBase, nn.LayerNorm, nn.BatchNorm1d,
                          nn.BatchNorm2d, nn.GroupNorm, nn.MultiheadAttention)):
            return m
    return None


def input_candidates(model, fn):
    """Lists of input specs to try, from the first layer and the forward's arity."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    k = max(1, len([p for p in params if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]))
    m = _first_layer(model)
    shapes = []
    if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.GroupNorm)):
        c = m.in_channels if isinstance(m, nn.Conv2d) else \
            m.num_features if isinstance(m, nn.BatchNorm2d) else m.num_channels
        shapes = [(2, c, s, s) for s in (16, 32, 64, 8)]
    elif isinstance(m, nn.ConvTranspose2d):
        shapes = [(2, m.in_channels, s, s) for s in (4, 8, 1, 16)]
    elif isinstance(m, (nn.Conv1d, nn.ConvTranspose1d, nn.BatchNorm1d)):
        c = m.num_features if isinstance(m, nn.BatchNorm1d) else m.in_channels
        shapes = [(2, c, 32), (2, c, 64), (2, c), (2, c, 16)]
    elif isinstance(m, nn.Conv3d):
        shapes = [(2, m.in_channels, 8, 8, 8)]
    elif isinstance(m, nn.Linear):
        f = m.in_features
        shapes = [(2, f), (2, 8, f), (8, f), (2, 16, f), (2, f, 4, 4)]
    elif isinstance(m, nn.Embedding):
        return [[["ids", [2, 8], m.num_embeddings]] * k, [["ids", [2, 8], m.num_embeddings]]]
    elif isinstance(m, nn.RNNBase):
        shapes = [(2, 8, m.input_size), (8, 2, m.input_size)]
    elif isinstance(m, nn.LayerNorm):
        d = m.normalized_shape[-1]
        shapes = [(2, 8, d), (2, d), (2, d, 8, 8), (2, 16, d)]
    elif isinstance(m, nn.MultiheadAttention):
        shapes = [(8, 2, m.embed_dim), (2, 8, m.embed_dim)]
    shapes += [(2, 16, 16, 16), (2, 8, 16), (2, 16), (2, 3, 32, 32), (2, 16, 32), (2, 16, 8, 8)]
    out = [[["randn", list(s)]] * k for s in shapes]
    if k == 2 and isinstance(m, nn.Linear):  # graph layers: (features, adjacency)
        out.insert(0, [["randn", [8, m.in_features]], ["adj", 8]])
    return out


def materialize(specs, seed, new=False):
    out = []
    for s in specs:
        if s[0] == "adj":
            g = torch.Generator().manual_seed(seed + 7)
            a = (torch.rand(s[1], s[1], generator=g) > 0.6).float() + torch.eye(s[1])
            out.append(a / a.sum(1, keepdim=True))
        else:
            out += make_inputs([s], seed, new)
    return out


def _has_float(out):
    return any(isinstance(t, torch.Tensor) and t.is_floating_point()
               for t in capture_corpus.flatten(out))


class _Timeout(Exception):
    pass


def _raise_timeout(*_):
    raise _Timeout()


def probe_class(mod, name, spec, timeout):
    """{'ctor': expression or 'kwargs', 'inputs', 'call'} that builds and runs in eager, or
    {'fail': why}."""
    cls = getattr(mod, name)
    signal.signal(signal.SIGALRM, _raise_timeout)
    signal.alarm(timeout)
    try:
        if "ctor" in spec:
            ctors = [("ctor", spec["ctor"])]
        else:
            ctors = [("kwargs", kw) for kw in ctor_candidates(cls)]
        last = "no constructor"
        for kind, c in ctors:
            try:
                torch.manual_seed(0)
                model = build_model(mod, name, {kind: c})
            except _Timeout:
                raise
            except Exception as ex:  # noqa: BLE001 - the next guess
                last = f"cannot build: {type(ex).__name__}: {str(ex)[:120]}"
                continue
            method = spec.get("call", "")
            fn = getattr(model, method) if method else model.forward
            cands = [spec["inputs"]] if "inputs" in spec else input_candidates(model, fn)
            for inputs in cands:
                try:
                    with torch.no_grad():
                        out = (getattr(model.eval(), method) if method else model.eval())(
                            *materialize(inputs, 1))
                    if _has_float(out):
                        return {kind: c, "inputs": inputs, **({"call": method} if method else {})}
                    last = "no floating-point output"
                except _Timeout:
                    raise
                except Exception as ex:  # noqa: BLE001 - the next candidate
                    last = f"eager raises: {type(ex).__name__}: {str(ex).splitlines()[0][:120] if str(ex) else ''}"
        return {"fail": last}
    except _Timeout:
        return {"fail": f"timeout ({timeout} s)"}
    finally:
        signal.alarm(0)


def build_model(mod, name, how):
    if "ctor" in how:
        ns = dict(vars(mod))
        ns.setdefault("torch", torch)
        ns.setdefault("nn", nn)
        ns.setdefault("SimpleNamespace", types.SimpleNamespace)
        return eval(how["ctor"], ns)  # noqa: S307 - the manifest's own expressions
    return getattr(mod, name)(**how.get("kwargs", {}))


def builder(mod, name, how):
    def build():
        # (the harnesses seed torch; constructors drawing from numpy or random, glow's
        # InvConv2dLU `np.random.randn`, get the same weights in every copy too)
        import random
        import numpy as np
        np.random.seed(0)
        random.seed(0)
        model = build_model(mod, name, how).eval()
        specs = how["inputs"]
        consts = [(i, s[1]) for i, s in enumerate(specs) if s[0] == "const"]
        if how.get("call") or consts:
            model = Call(model, how.get("call", ""), consts, [])
        tensors = [s for s in specs if s[0] != "const"]
        first = tuple(materialize(tensors, 1))
        return Program(model, [first, first, tuple(materialize(tensors, 1, new=True))])
    return build


# -- one file, in its own process ---------------------------------------------------------------
def child(index, task, timeout, probe_rows, only, emit):
    e = load_manifest()[index]
    key = file_key(e)
    try:
        mod = import_file(e)
    except BaseException as ex:  # noqa: BLE001 - reported as the file's failure
        why = f"import: {type(ex).__name__}: {str(ex)[:150]}"
        if task == "probe":
            emit({"file": key, "cls": "*", "fail": why})
        for p in probe_rows if task != "probe" else ():
            if "fail" not in p and (not only or any(o in key or o == p["cls"] for o in only)):
                for mode in task.split(","):
                    emit({"file": key, "cls": p["cls"], "mode": mode, "skip": why})
        return
    specs = e.get("classes", {})
    if task == "probe":
        if not classes_of(mod):
            emit({"file": key, "cls": "*", "fail": "no nn.Module classes"})
        for name in classes_of(mod):
            spec = specs.get(name, {})
            if only and not any(o in key or o == name for o in only):
                continue
            if "skip" in spec:
                emit({"file": key, "cls": name, "fail": f"skipped: {spec['skip']}"})
                continue
            emit({"file": key, "cls": name, "stubbed": mod.__stubbed__,
                  **probe_class(mod, name, spec, timeout)})
        return
    from torch._dynamo.utils import counters
    capture_corpus.WARM_CALLS = 0  # the strict protocol: two identical calls, then new values
    for p in probe_rows:
        if "fail" in p or (only and not any(o in key or o == p["cls"] for o in only)):
            continue
        for mode in task.split(","):
            t0 = time.perf_counter()
            run = capture_corpus.run_program if mode == "inference" else \
                capture_train_corpus.run_program
            counters.clear()  # Dynamo's graphs compiled (recompiles included), of this run
            row = run(f"{p['cls']}", builder(mod, p["cls"], p), timeout)
            row.update(file=key, cls=p["cls"], mode=mode,
                       seconds=round(time.perf_counter() - t0, 1))
            if any(k.endswith(": Timeout") for k in row.get("stop_reasons", {})):
                # the harness's alarm went off inside capture, which made it a stop
                row = {k: row[k] for k in ("name", "file", "cls", "mode", "seconds")}
                row["skip"] = f"timeout ({timeout} s)"
            if "skip" not in row:
                row["capture_strict"] = capture_strict(row)
                row["dynamo_graphs"] = counters["stats"]["unique_graphs"]
                row["dynamo_strict"] = bool(row.get("dynamo_whole")) and \
                    row["dynamo_graphs"] == 1
            row.pop("stop_sites", None)
            emit(row)


def capture_strict(row):
    """No stop, no eager run, and one graph for the calls (one record and no graph where
    the module runs no op: an Identity returns its input)."""
    graphs = row.get("graphs") if row["mode"] == "inference" else row.get("training_graphs")
    return bool(row.get("capture_whole")) and (
        graphs == 1 or graphs == 0 and row.get("records") == 1 and not row.get("ops_eager"))


def _quiet():
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)


def _forked(conn, index, task, timeout, probe_file, only, memory_gb):
    capture_corpus.limit_memory(memory_gb)
    key = file_key(load_manifest()[index])
    probe = [p for p in probe_rows(probe_file, load_manifest()) if p["file"] == key] \
        if task != "probe" else []
    try:
        child(index, task, timeout, probe, only, lambda row: conn.send(json.dumps(row, default=str)))
    finally:
        conn.close()
        os._exit(0)  # noqa: SLF001 - no atexit handlers of the parent's


def _spawn(index, task, timeout, probe_file, only, budget, memory_gb):
    """Rows of one file, from a forked process (torch already imported: each file starts in
    its own process without paying the import again) that `budget` seconds end."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_forked, args=(send, index, task, timeout, probe_file, only,
                                             memory_gb))
    proc.start()
    send.close()
    rows, deadline, err = [], time.monotonic() + budget, ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            err = f"file timeout ({budget} s)"
            break
        if recv.poll(min(left, 1.0)):
            try:
                rows.append(json.loads(recv.recv()))
            except EOFError:
                break
        elif not proc.is_alive() and not recv.poll():
            break
    proc.join(5)
    if proc.exitcode not in (0, None) and not err:
        err = f"exit code {proc.exitcode}"
    return rows, err


def save_probe(entries, probe):
    """The probe's classes that run in eager, into the manifest's `probed` (how each is
    built and called): `run` uses them where no --probe file exists."""
    for e in entries:
        e["probed"] = {p["cls"]: {k: v for k, v in p.items() if k not in ("file", "cls", "stubbed")}
                       for p in probe if p["file"] == file_key(e) and "fail" not in p}
    with open(MANIFEST, "w") as f:
        json.dump({"entries": entries}, f, indent=1)
        f.write("\n")


def probe_rows(path, entries):
    """The probe's rows: from the --probe file, else from the manifest's `probed`."""
    if path and os.path.exists(path):
        return read_rows(path)
    return [dict(how, file=file_key(e), cls=c) for e in entries
            for c, how in e.get("probed", {}).items()]


def read_rows(paths):
    rows = []
    for path in [p for p in paths.split(",") if p and os.path.exists(p)]:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


# -- the tables ---------------------------------------------------------------------------------
def _rate(rows, key):
    n = sum(bool(r.get(key)) for r in rows)
    return f"{n}/{len(rows)} ({100 * n / max(len(rows), 1):.0f}%)"


def table(probe, rows, every=False):
    built = [p for p in probe if "fail" not in p]
    files = {p["file"] for p in probe}
    lines = [f"files: {len(files)} from {len({f.split('/')[0] for f in files})} repositories; "
             f"nn.Module classes found: {len([p for p in probe if p['cls'] != '*'])}, "
             f"built and run in eager: {len(built)}", ""]
    fails = collections.Counter(p["fail"].split(":")[0] for p in probe if "fail" in p)
    lines += ["Not run (" + ", ".join(f"{k}: {n}" for k, n in fails.most_common()) + ")", ""]
    lines += ["| | eagerc.capture | Dynamo (fullgraph, eager backend) |", "|---|---|---|"]
    modes = [m for m in ("inference", "training") if any(r["mode"] == m for r in rows)]
    for r in rows:
        if "skip" not in r:
            r["capture_strict"] = capture_strict(r)
    for m in modes:
        done = [r for r in rows if r["mode"] == m and "skip" not in r]
        skipped = len([r for r in rows if r["mode"] == m]) - len(done)
        lines += [f"| {m}: modules run | {len(done)} (skipped {skipped}) | |",
                  f"| {m}: whole-graph, one graph | {_rate(done, 'capture_strict')} | "
                  f"{_rate(done, 'dynamo_strict')} |",
                  f"| {m}: whole-graph (capture: no stop, no eager run; Dynamo: no break) | "
                  f"{_rate(done, 'capture_whole')} | {_rate(done, 'dynamo_whole')} |",
                  f"| {m}: equal to eager | {_rate(done, 'capture_equal')} | "
                  f"{_rate(done, 'dynamo_equal')} |",
                  f"| {m}: new exceptions | {sum(bool(r.get('capture_new_exc')) for r in done)} | |"]
    for m in modes:
        done = [r for r in rows if r["mode"] == m and "skip" not in r]
        reasons, example = collections.Counter(), {}
        for r in done:
            why = list(r.get("stop_reasons", {}))
            if not why and not r.get("capture_strict"):
                why = ["re-record: " + (max(r["guard_failures"], key=r["guard_failures"].get)
                                        if r.get("guard_failures") else
                                        f"{r.get('graphs', r.get('training_graphs'))} graphs")]
            for k in why:
                k = k[:140]
                reasons[k] += 1
                example.setdefault(k, f"{r['file']}:{r['cls']}")
        if reasons:
            lines += ["", f"Capture not whole-graph ({m}), by modules (an example each):", ""]
            lines += [f"- {n} × {k} (e.g. {example[k]})" for k, n in reasons.most_common()]
        dyn = collections.Counter((r.get("dynamo_reason") or "")[:100] if not r.get(
            "dynamo_whole") else f"recompiled: {r.get('dynamo_graphs')} graphs"
            for r in done if not r.get("dynamo_strict"))
        if dyn:
            lines += ["", f"Dynamo not whole-graph ({m}), by modules:", ""]
            lines += [f"- {n} × {k}" for k, n in dyn.most_common(12)]
    by_repo = collections.defaultdict(list)
    for r in rows:
        if "skip" not in r:
            by_repo[r["file"].split("/")[0]].append(r)
    lines += ["", "| repository | modules | " + " | ".join(
        f"{m}: capture / Dynamo whole" for m in modes) + " |", "|---|---|" + "---|" * len(modes)]
    for repo, rs in sorted(by_repo.items()):
        cells = []
        for m in modes:
            mr = [r for r in rs if r["mode"] == m]
            cells.append(f"{sum(bool(r.get('capture_strict')) for r in mr)} / "
                         f"{sum(bool(r.get('dynamo_strict')) for r in mr)} of {len(mr)}")
        lines.append(f"| {repo.replace('__', '/')} | {len({r['cls'] + r['file'] for r in rs})} | "
                     + " | ".join(cells) + " |")
    if every:
        lines += ["", "| module | mode | capture whole | = eager | Dynamo whole | = eager | "
                  "capture stop / Dynamo break |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            name = f"{r['file'].split('/', 1)[1]}:{r['cls']}"
            if "skip" in r:
                lines.append(f"| {name} | {r['mode']} | – | – | – | – | skipped: {r['skip'][:90]} |")
            else:
                r = dict(r, capture_whole=r.get("capture_strict"), dynamo_whole=r.get("dynamo_strict"))
                lines.append(f"| {name} | {r['mode']} | {capture_corpus.result_cells(r)} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", choices=["extract", "probe", "save", "run", "table"])
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--probe", default="/tmp/longtail-probe.jsonl",
                    help="JSON lines of the probe (written by probe, read by run and table)")
    ap.add_argument("--rows", default="/tmp/longtail-rows.jsonl",
                    help="JSON lines of finished modules: rows found there are reused (a run "
                         "that died resumes), new ones appended; more files after commas are read")
    ap.add_argument("--mode", choices=["inference", "training", "both"], default="both")
    ap.add_argument("--only", default="", help="comma-separated parts of file paths or class names")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per class and mode")
    ap.add_argument("--memory-gb", type=float, default=6)
    ap.add_argument("--all", action="store_true", help="every module in the table")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    only = [o for o in args.only.split(",") if o]
    if args.task == "extract":
        return extract(args.mirrors)
    _quiet()
    entries = load_manifest()
    if args.task == "probe":
        done = {r["file"] for r in read_rows(args.rows)}
        for i, e in enumerate(entries):
            key = file_key(e)
            if key in done or (only and not any(o in key for o in only) and
                               not any(o in e.get("classes", {}) for o in only)):
                continue
            if not os.path.exists(os.path.join(CORPUS, e["repo"].replace("/", "__"), e["path"])):
                rows = [{"file": key, "cls": "*", "fail": "absent (not extracted)"}]
            else:
                rows, err = _spawn(i, "probe", args.timeout, None, only, 30 + 6 * args.timeout,
                                   args.memory_gb)
                if not rows:
                    rows = [{"file": key, "cls": "*", "fail": f"process: {err.strip()[-150:]}"}]
            with open(args.rows, "a") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
            print(f"# {key}: " + ", ".join(f"{r['cls']}: {'ok' if 'fail' not in r else r['fail'][:60]}"
                                           for r in rows), file=sys.stderr, flush=True)
        return
    probe = probe_rows(args.probe, entries)
    if args.task == "save":
        save_probe(entries, probe)
        return
    modes = ["inference", "training"] if args.mode == "both" else [args.mode]
    done = {(r["file"], r["cls"], r["mode"]): r for r in read_rows(args.rows)}
    if args.task == "run":
        args.rows = args.rows.split(",")[0]
        for i, e in enumerate(entries):
            key = file_key(e)
            todo = [p for p in probe if p["file"] == key and "fail" not in p
                    and (not only or any(o in key or o == p["cls"] for o in only))
                    and any((key, p["cls"], m) not in done for m in modes)]
            if not todo:
                continue
            t0 = time.perf_counter()
            rows, err = _spawn(i, ",".join(modes), args.timeout, args.probe,
                               only or [p["cls"] for p in todo],
                               60 + 3 * args.timeout * len(todo) * len(modes), args.memory_gb)
            rows = [r for r in rows if "mode" in r]
            got = {(r["file"], r["cls"], r["mode"]) for r in rows}
            for p in todo:
                for m in modes:
                    if (key, p["cls"], m) not in got and (key, p["cls"], m) not in done:
                        rows.append({"file": key, "cls": p["cls"], "mode": m,
                                     "skip": f"the process died: {err.strip()[-120:]}"})
            with open(args.rows, "a") as f:
                for r in rows:
                    f.write(json.dumps(r, default=str) + "\n")
                    done[(r["file"], r["cls"], r["mode"])] = r
            print(f"# {key} ({time.perf_counter() - t0:.0f}s): " + "; ".join(
                f"{r['cls']}/{r['mode'][:5]}: " + ("skip" if "skip" in r else
                                                  f"cap={int(bool(r.get('capture_strict')))} "
                                                  f"dyn={int(bool(r.get('dynamo_whole')))}")
                for r in rows), file=sys.stderr, flush=True)
    rows = [r for r in done.values() if r["mode"] in modes]
    print(table(probe, rows, args.all))


if __name__ == "__main__":
    main()
