"""Run eagerc.capture and Dynamo side by side on a corpus of programs (issue 12).

    python tools/capture_corpus.py                       # idioms + named transformers models
    python tools/capture_corpus.py --suite idioms        # tools/capture_idioms.py only
    python tools/capture_corpus.py --suite diffusers     # tools/capture_diffusers.py (pip install diffusers)
    python tools/capture_corpus.py --suite hf --hf-all --max-models 60 --timeout 120
    python tools/capture_corpus.py --hf-all --base-models 150     # + transformers base models
    python tools/capture_corpus.py --only module_counter,llama -v

Programs: the real-world idioms of tools/capture_idioms.py, transformers architectures built
from tiny configs (random init, eval; inputs made from the config): Llama, Mistral, T5,
BART, Whisper, CLIP, BERT, GPT-2, ViT by hand, and with --hf-all every causal-LM
architecture of transformers' auto mapping that a generic tiny config can build.

Per program, under torch.no_grad(): eager runs the calls on its own fresh copy (same seed);
eagerc.capture (backend="eager": the recorded graph runs op by op, so any difference is
capture's, not a compiler's rounding) and torch.compile(fullgraph=True, backend="eager")
each run the same calls on theirs. Reported per tool: whole-graph (every call served by a
captured graph: no stop, no eager run / Dynamo compiled without a graph break), equal to
eager (results and outside state, eagerc.testing's tolerance table), a new exception (one
eager did not raise), and for capture re-records on identical calls (with the guard check
that missed) and the stop reasons.
"""
import argparse
import collections
import dataclasses
import json
import os
import signal
import sys
import time
import traceback
import warnings

import torch
import torch._dynamo as dynamo

sys.path.insert(0, os.path.dirname(__file__))


WARM_CALLS = 4


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


# -- comparing results ------------------------------------------------------------------------
def flatten(value, depth=0):
    """Comparable leaves of a result: tensors, numbers, strings (dataclasses, ModelOutputs,
    namedtuples, dicts and sequences opened up)."""
    if depth > 6:
        return [type(value).__name__]
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return flatten([getattr(value, f.name) for f in dataclasses.fields(value)], depth + 1)
    if isinstance(value, dict):
        return [k for k in value] + flatten(list(value.values()), depth + 1)
    if isinstance(value, (list, tuple)):
        out = [type(value).__name__, len(value)]
        for v in value:
            out += flatten(v, depth + 1)
        return out
    if isinstance(value, (int, float, str, bool, type(None))):
        return [value]
    if hasattr(value, "to_tuple"):
        return flatten(value.to_tuple(), depth + 1)
    return [type(value).__name__]


def equal(a, b):
    from eagerc.testing import assert_close
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                return False
            try:
                assert_close(x, y, model=True, equal_nan=True)
            except AssertionError:
                return False
        elif x != y and not (isinstance(x, float) and x != x and y != y):
            return False
    return True


# -- where tensor ops run ---------------------------------------------------------------------
class OpCounter(torch.overrides.TorchFunctionMode):
    """Counts torch calls made inside captured graphs (the backend below runs the recorded
    graph op by op, flagged) and outside them (eager runs, the program's own code)."""

    def __init__(self):
        super().__init__()
        self.inside = self.outside = 0
        self.in_graph = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.in_graph:
            self.inside += 1
        elif getattr(func, "__name__", "") not in _NOT_OPS:
            self.outside += 1
        return func(*args, **(kwargs or {}))

    def backend(self, gm, example_inputs):
        def run(*inputs):
            self.in_graph = True
            try:
                return gm(*inputs)
            finally:
                self.in_graph = False
        return run


_NOT_OPS = frozenset("_set_grad_enabled __get__ size dim shape dtype device ndim numel __len__ is_floating_point "
                     "stride is_contiguous requires_grad".split())


# -- running one program ----------------------------------------------------------------------
def run_calls(fn, calls):
    """Results (or ('raised', type name)) of each call."""
    outs = []
    with torch.no_grad():
        for args in calls:
            try:
                outs.append(fn(*args))
            except Timeout:
                raise
            except Exception as e:  # noqa: BLE001 - compared with eager's outcome
                outs.append(("raised", type(e).__name__, str(e).split("\n")[0][:160]))
    return outs


def compare(outs, ref):
    """(equal, new exception or None)."""
    for o, r in zip(outs, ref):
        o_raised = isinstance(o, tuple) and len(o) == 3 and o[0] == "raised"
        r_raised = isinstance(r, tuple) and len(r) == 3 and r[0] == "raised"
        if o_raised and not r_raised:
            return False, f"{o[1]}: {o[2]}"
        if o_raised != r_raised:
            return False, None
        if not o_raised and not equal(o, r):
            return False, None
    return True, None


def sequence(prog):
    """The calls made: the first one 1 + WARM_CALLS times, then the program's others."""
    return prog.calls[:1] * (1 + WARM_CALLS) + prog.calls[1:]


def run_program(name, build, timeout, n_identical=3, with_dynamo=True):
    """One program's row: eager's results, capture's, and (with_dynamo) Dynamo's."""
    from eagerc.capture import capture, capture_stats

    row = {"name": name}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        torch.manual_seed(0)
        prog = build()
        calls = sequence(prog)
        n_identical += WARM_CALLS
        ref = run_calls(prog.fn, calls)
        ref_state = prog.state() if prog.state else None
        if all(isinstance(r, tuple) and len(r) == 3 and r[0] == "raised" for r in ref):
            row["skip"] = f"eager raises: {ref[0][1]}: {ref[0][2]}"
            return row
        # eagerc.capture
        torch.manual_seed(0)
        prog = build()
        calls = sequence(prog)  # this copy's own arguments (they may be its state)
        counter = OpCounter()
        cap = capture(prog.fn, backend=counter.backend)
        t0 = time.perf_counter()
        # Identical calls before measuring: partial capture records one level of child
        # modules per call.
        outs = run_calls(cap, calls[:1 + WARM_CALLS])
        with counter:  # steady state: the remaining identical calls
            outs += run_calls(cap, calls[1 + WARM_CALLS:n_identical])
        row["ops_in_graphs"], row["ops_eager"] = counter.inside, counter.outside
        identical = capture_stats(cap)
        outs += run_calls(cap, calls[n_identical:])
        row["capture_s"] = time.perf_counter() - t0
        stats = capture_stats(cap)
        ok, new_exc = compare(outs, ref)
        if ok and prog.state and not equal(prog.state(), ref_state):
            ok = False
        row["capture_equal"], row["capture_new_exc"] = ok, new_exc
        row["stop_reasons"] = stats["stop_reasons"]
        row["capture_whole"] = not stats["stop_reasons"] and stats["eager_runs"] == 0
        row["rerecord"] = identical["misses"] > 1
        row["guard_failures"] = identical.get("guard_failures", {})
        row["records"], row["graphs"] = stats["records"], stats["graphs"]
        if not with_dynamo:  # the table's Dynamo columns only: tests check capture's
            return row
        # Dynamo
        dynamo.reset()
        torch.manual_seed(0)
        prog = build()
        calls = sequence(prog)
        compiled = torch.compile(prog.fn, fullgraph=True, backend="eager")
        outs = run_calls(compiled, calls)
        ok, new_exc = compare(outs, ref)
        if ok and prog.state and not equal(prog.state(), ref_state):
            ok = False
        row["dynamo_equal"] = ok
        row["dynamo_whole"] = new_exc is None
        row["dynamo_reason"] = new_exc
    except Timeout:
        row["skip"] = f"timeout ({timeout} s)"
    except MemoryError:
        row = {"name": name, "skip": "out of memory (--memory-gb)"}
    except Exception as e:  # noqa: BLE001 - a program that cannot be built
        row["skip"] = f"cannot build: {type(e).__name__}: {str(e).splitlines()[0][:120]}" \
            if str(e) else f"cannot build: {type(e).__name__}"
        if "-v" in sys.argv:
            traceback.print_exc()
    finally:
        signal.alarm(0)
    return row


# -- the corpus -------------------------------------------------------------------------------
def programs(suite, hf_all, max_models, max_base=0):
    out = {}
    if suite in ("all", "idioms"):
        from capture_idioms import PROGRAMS
        out.update(PROGRAMS)
    if suite in ("all", "hf"):
        from capture_hf import hf_programs
        out.update(hf_programs(hf_all, max_models, max_base))
    if suite in ("all", "diffusers"):
        from capture_diffusers import diffusers_programs
        out.update(diffusers_programs())
    return out


def table(rows):
    done = [r for r in rows if "skip" not in r]
    n = len(done)
    pct = lambda k: f"{sum(bool(r.get(k)) for r in done)}/{n} ({100 * sum(bool(r.get(k)) for r in done) / max(n, 1):.0f}%)"  # noqa: E731
    ins = sum(r.get("ops_in_graphs", 0) for r in done)
    outs = sum(r.get("ops_eager", 0) for r in done)
    lines = [f"programs run: {n} (skipped {len(rows) - n}: cannot build, eager raises or "
             "timeout)", "",
             "| | eagerc.capture | Dynamo (fullgraph, eager backend) |", "|---|---|---|",
             f"| whole-graph | {pct('capture_whole')} | {pct('dynamo_whole')} |",
             f"| equal to eager | {pct('capture_equal')} | {pct('dynamo_equal')} |",
             f"| new exceptions | {sum(bool(r.get('capture_new_exc')) for r in done)} | "
             f"(graph breaks under fullgraph are refusals, not counted) |",
             f"| re-record on an identical call | {sum(bool(r.get('rerecord')) for r in done)}"
             " | |",
             f"| tensor ops inside captured graphs (steady state, partial capture included) | "
             f"{ins}/{ins + outs} ({100 * ins / max(ins + outs, 1):.1f}%) | |", ""]
    reasons = collections.Counter()
    for r in done:
        for k in r.get("stop_reasons", {}):
            reasons[k] += 1
    if reasons:
        lines += ["Capture stop reasons, by programs they cost:", ""]
        lines += [f"- {n} × {k}" for k, n in reasons.most_common()]
        lines.append("")
    lines += ["| program | capture whole | capture = eager | records | ops in graphs | "
              "Dynamo whole | Dynamo = eager | capture stop / Dynamo break |",
              "|---|---|---|---|---|---|---|---|"]
    yn = lambda v: "yes" if v else "no"  # noqa: E731

    def frac(r):
        total = r.get("ops_in_graphs", 0) + r.get("ops_eager", 0)
        return f"{100 * r['ops_in_graphs'] / total:.0f}%" if total else "–"
    for r in rows:
        if "skip" in r:
            lines.append(f"| {r['name']} | – | – | – | – | – | – | skipped: {r['skip']} |")
            continue
        why = why_cell(r)
        lines.append(f"| {r['name']} | {yn(r['capture_whole'])} | {yn(r['capture_equal'])} | "
                     f"{r['records']}{' (re-record)' if r['rerecord'] else ''} | "
                     f"{frac(r)} | {yn(r['dynamo_whole'])} | {yn(r['dynamo_equal'])} | {why} |")
    return "\n".join(lines)


def limit_memory(gigabytes) -> None:
    """Cap this process's address space (every corpus runner's --memory-gb; 0: none): a
    model too large raises MemoryError and is skipped instead of the OOM killer ending
    the run."""
    if gigabytes:
        import resource

        limit = int(gigabytes * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def result_cells(r) -> str:
    """A row's capture whole, capture = eager, Dynamo whole, Dynamo = eager and why cells."""
    yn = lambda v: "yes" if v else "no"  # noqa: E731
    return (f"{yn(r.get('capture_whole'))} | {yn(r.get('capture_equal'))} | "
            f"{yn(r.get('dynamo_whole'))} | {yn(r.get('dynamo_equal'))} | {why_cell(r)}")


def why_cell(r) -> str:
    """A table row's last cell (every corpus runner's): capture's stop reasons, a new
    exception, a re-record with the guard check that missed, and Dynamo's break."""
    why = "; ".join(k[:120] for k in r.get("stop_reasons", {}))
    if r.get("capture_new_exc"):
        why += f" NEW EXCEPTION {r['capture_new_exc'][:120]}"
    if r.get("rerecord"):
        missed = r.get("guard_failures") or {}
        why += " re-record" + (f": {max(missed, key=missed.get)[-90:]}" if missed else "")
    if r.get("dynamo_reason"):
        why += f" / {r['dynamo_reason'][:90]}"
    return why.replace("|", "/")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=["all", "idioms", "hf", "diffusers"], default="all")
    ap.add_argument("--hf-all", action="store_true",
                    help="also every causal-LM architecture of transformers' auto mapping")
    ap.add_argument("--max-models", type=int, default=400)
    ap.add_argument("--base-models", type=int, default=0,
                    help="also the first N base models of transformers' auto mapping "
                         "(token-id or image inputs)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per program")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--memory-gb", type=float, default=10,
                    help="address-space limit of this process (a model too large for its "
                         "tiny config raises MemoryError and is skipped, instead of the OOM "
                         "killer ending the run)")
    ap.add_argument("--rows", default="",
                    help="JSON-lines file of finished programs: rows found there are reused "
                         "(a run that died resumes), new ones appended")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    limit_memory(args.memory_gb)
    done = {}
    if args.rows and os.path.exists(args.rows):
        with open(args.rows) as f:
            for line in f:
                row = json.loads(line)
                done[row["name"]] = row
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    progs = programs(args.suite, args.hf_all, args.max_models, args.base_models)
    if args.only:
        progs = {k: v for k, v in progs.items() if k in args.only.split(",")}
    rows = []
    for name, build in progs.items():
        t0 = time.perf_counter()
        if name in done:
            rows.append(done[name])
            continue
        if args.rows:  # a program that kills the process is skipped when the run resumes
            with open(args.rows, "a") as f:
                f.write(json.dumps({"name": name, "skip": "the process died running it"})
                        + "\n")
        row = run_program(name, build, args.timeout)
        rows.append(row)
        if args.rows:
            with open(args.rows, "a") as f:
                f.write(json.dumps(row, default=str) + "\n")
        print(f"# {name}: {time.perf_counter() - t0:.1f}s "
              f"{ {k: v for k, v in row.items() if k != 'name'} }", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
