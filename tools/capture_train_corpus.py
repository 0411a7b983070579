"""Training steps under eagerc.capture and Dynamo, side by side, on the transformers corpus
of tools/capture_hf.py (issue 30).

    python tools/capture_train_corpus.py                          # the named architectures
    python tools/capture_train_corpus.py --hf-all --max-models 40 --timeout 180
    python tools/capture_train_corpus.py --only gpt2,bert -v
    python tools/capture_train_corpus.py --diffusers --only diffusers_vae,diffusers_unet_cond

Per model (tiny config, random init, `train()`, dropout off so that eager is the
reference): a loss (mean of squares of the output) and its backward, STEPS times with SGD
between steps (outside the captured call), the first step's call repeated as in the
inference corpus. Eager runs on its own copy (same seed); eagerc.capture
(backend="eager": AOTAutograd's forward and backward graphs run op by op, so a difference
is capture's, not a compiler's rounding) and torch.compile(fullgraph=True, backend="eager")
on theirs. Reported per tool: whole-graph (capture: every step served by a training graph,
no stop, no eager run; Dynamo: no graph break), losses and gradients equal to eager
(eagerc.testing's model tolerances; a gradient None in eager and zero under the tool is
equal, as under torch.compile), new exceptions.
"""
import argparse
import collections
import os
import signal
import sys
import time
import traceback
import warnings

import torch
import torch._dynamo as dynamo

sys.path.insert(0, os.path.dirname(__file__))

from capture_corpus import Timeout, _alarm, flatten  # noqa: E402

STEPS = 3


def _loss(out):
    leaves = [t for t in flatten(out) if isinstance(t, torch.Tensor) and t.is_floating_point()
              and t.requires_grad and t.numel()]  # (the mean of an empty one is nan)
    if not leaves:
        raise ValueError("no differentiable output")
    return sum(t.float().pow(2).mean() for t in leaves)


def _no_dropout(model):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
        for k, v in list(vars(m).items()):  # attn_dropout, attention_dropout, ... as floats
            if "drop" in k.lower() and isinstance(v, float):
                setattr(m, k, 0.0)


def _train(fn, module, calls):
    """Per step: ('ok', loss, grads) or ('raised', type, message)."""
    opt = torch.optim.SGD(module.parameters(), lr=0.01)
    out = []
    for args in calls:
        try:
            opt.zero_grad()
            loss = _loss(fn(*args))
            loss.backward()
            grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                     for p in module.parameters()]
            opt.step()
            out.append(("ok", loss.detach(), grads))
        except Timeout:
            raise
        except Exception as e:  # noqa: BLE001 - compared with eager's outcome
            out.append(("raised", type(e).__name__, str(e).split("\n")[0][:160]))
    return out


def _compare(got, ref):
    from eagerc.testing import assert_close
    for g, r in zip(got, ref):
        if g[0] != r[0]:
            return False, (f"{g[1]}: {g[2]}" if g[0] == "raised" else None)
        if g[0] == "raised":
            continue
        try:  # (a step eager takes to inf/NaN: equal where the tool's NaNs are eager's)
            assert_close(g[1], r[1], model=True, equal_nan=True)
            for a, b in zip(g[2], r[2]):
                assert_close(a, b, model=True, equal_nan=True)
        except AssertionError:
            return False, None
    return True, None


def _build(build):
    torch.manual_seed(0)
    prog = build()
    module = prog.fn
    module.train()
    _no_dropout(module)
    calls = prog.calls[:1] * 2 + prog.calls[1:STEPS]
    return module, calls


def run_program(name, build, timeout):
    from eagerc.capture import capture, capture_stats
    row = {"name": name}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        module, calls = _build(build)
        ref = _train(module, module, calls)
        if all(r[0] == "raised" for r in ref):
            row["skip"] = f"eager raises: {ref[0][1]}: {ref[0][2]}"
            return row
        module, calls = _build(build)
        cap = capture(module, backend="eager")
        got = _train(cap, module, calls)
        stats = capture_stats(cap)
        row["capture_equal"], row["capture_new_exc"] = _compare(got, ref)
        row["stop_reasons"] = stats["stop_reasons"]
        row["capture_whole"] = not stats["stop_reasons"] and stats["eager_runs"] == 0 and \
            stats["training_graphs"] > 0
        row["records"], row["training_graphs"] = stats["records"], stats["training_graphs"]
        dynamo.reset()
        module, calls = _build(build)
        compiled = torch.compile(module, fullgraph=True, backend="eager")
        got = _train(compiled, module, calls)
        ok, exc = _compare(got, ref)
        row["dynamo_equal"], row["dynamo_whole"], row["dynamo_reason"] = ok, exc is None, exc
    except Timeout:
        row["skip"] = f"timeout ({timeout} s)"
    except Exception as e:  # noqa: BLE001 - a program that cannot be built
        row["skip"] = f"cannot build: {type(e).__name__}: {str(e).splitlines()[0][:120]}" \
            if str(e) else f"cannot build: {type(e).__name__}"
        if "-v" in sys.argv:
            traceback.print_exc()
    finally:
        signal.alarm(0)
    return row


def table(rows):
    done = [r for r in rows if "skip" not in r]
    n = len(done)

    def pct(k):
        c = sum(bool(r.get(k)) for r in done)
        return f"{c}/{n} ({100 * c / max(n, 1):.0f}%)"
    lines = [f"models trained: {n} (skipped {len(rows) - n})", "",
             "| training steps | eagerc.capture | Dynamo (fullgraph, eager backend) |",
             "|---|---|---|",
             f"| whole-graph | {pct('capture_whole')} | {pct('dynamo_whole')} |",
             f"| losses and gradients equal to eager | {pct('capture_equal')} | "
             f"{pct('dynamo_equal')} |",
             f"| new exceptions | {sum(bool(r.get('capture_new_exc')) for r in done)} | |", ""]
    reasons = collections.Counter(k for r in done for k in r.get("stop_reasons", {}))
    if reasons:
        lines += ["Capture stop reasons, by models:", ""]
        lines += [f"- {c} × {k}" for k, c in reasons.most_common()] + [""]
    lines += ["| model | capture whole | capture = eager | Dynamo whole | Dynamo = eager | "
              "capture stop / Dynamo break |", "|---|---|---|---|---|---|"]
    yn = lambda v: "yes" if v else "no"  # noqa: E731
    for r in rows:
        if "skip" in r:
            lines.append(f"| {r['name']} | – | – | – | – | skipped: {r['skip']} |")
            continue
        why = "; ".join(r["stop_reasons"])
        if r.get("capture_new_exc"):
            why += f" NEW EXCEPTION {r['capture_new_exc']}"
        if r.get("dynamo_reason"):
            why += f" / {r['dynamo_reason'][:90]}"
        lines.append(f"| {r['name']} | {yn(r['capture_whole'])} | {yn(r['capture_equal'])} | "
                     f"{yn(r['dynamo_whole'])} | {yn(r['dynamo_equal'])} | {why} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hf-all", action="store_true")
    ap.add_argument("--max-models", type=int, default=400)
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--only", default="")
    ap.add_argument("--diffusers", action="store_true",
                    help="also tools/capture_diffusers.py's models (pip install diffusers)")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    from capture_hf import hf_programs
    progs = hf_programs(args.hf_all, args.max_models)
    if args.diffusers:
        from capture_diffusers import diffusers_programs
        progs.update(diffusers_programs())
    if args.only:
        progs = {k: v for k, v in progs.items() if k in args.only.split(",")}
    rows = []
    for name, build in progs.items():
        t0 = time.perf_counter()
        row = run_program(name, build, args.timeout)
        rows.append(row)
        print(f"# {name}: {time.perf_counter() - t0:.1f}s "
              f"{ {k: v for k, v in row.items() if k != 'name'} }", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
