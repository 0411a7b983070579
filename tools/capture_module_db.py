"""torch.nn modules of PyTorch's own tests (`common_modules.module_db`, first sample input of
each) under eagerc.capture and Dynamo side by side, in inference and in a training step
(issue 30).

    python tools/capture_module_db.py [--only Linear,Conv2d] [--samples 1]

Per module: eager on its own instance (same seed), eagerc.capture(backend="eager") and
torch.compile(fullgraph=True, backend="eager") on theirs, three identical calls: inference
(no_grad, eval) compares outputs; training (train(), grad on) compares the sum's gradients
of the parameters and of the floating-point inputs (eagerc.testing's tolerances). Modules
with random ops in train mode (dropout, RReLU) are compared in inference only.
"""
import argparse
import collections
import copy
import os
import signal
import sys
import warnings

import torch
import torch._dynamo as dynamo

sys.path.insert(0, os.path.dirname(__file__))

from capture_corpus import Timeout, _alarm  # noqa: E402

RANDOM_IN_TRAIN = ("Dropout", "AlphaDropout", "FeatureAlphaDropout", "RReLU",
                   "Dropout1d", "Dropout2d", "Dropout3d")


def _leaves(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _leaves(v)]
    return []


def _close(a, b):
    from eagerc.testing import assert_close
    try:
        assert_close(a, b, equal_nan=True)
        return True
    except (AssertionError, TypeError, ValueError):
        return False


def _samples(info, n):
    out = []
    for training in (False, True):
        try:
            inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                             requires_grad=training, training=training)
        except Exception:  # noqa: BLE001 - a sample generator this torch cannot run
            inputs = []
        out.append(inputs[:n])
    return out


def _run(call, module, sample, training):
    """(outputs, grads) of three identical calls, or ('raised', text)."""
    args, kwargs = sample.forward_input.args, sample.forward_input.kwargs
    torch.manual_seed(1)  # the same draws for each tool (lazy modules initialize on call)
    res = []
    try:
        for _ in range(3):
            if training:
                module.zero_grad()
                a = [x.detach().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor)
                     else x for x in args]
                outs = _leaves(call(*a, **kwargs))
                loss = sum(o.float().sum() for o in outs if o.requires_grad)
                if isinstance(loss, torch.Tensor):
                    loss.backward()
                grads = [p.grad for p in module.parameters()] + \
                    [x.grad for x in a if isinstance(x, torch.Tensor)]
                res.append((outs, [g if g is not None else None for g in grads]))
            else:
                with torch.no_grad():
                    res.append((_leaves(call(*args, **kwargs)), []))
    except Exception as e:  # noqa: BLE001 - compared with eager's outcome
        return ("raised", f"{type(e).__name__}: {str(e).splitlines()[0][:100]}" if str(e)
                else type(e).__name__)
    return res


def _equal(got, ref):
    if isinstance(ref, tuple) or isinstance(got, tuple):
        return isinstance(ref, tuple) and isinstance(got, tuple)
    for (o, g), (ro, rg) in zip(got, ref):
        if len(o) != len(ro) or not all(_close(a, b) for a, b in zip(o, ro)):
            return False
        for a, b in zip(g, rg):
            a = a if a is not None else (torch.zeros_like(b) if b is not None else None)
            b = b if b is not None else (torch.zeros_like(a) if a is not None else None)
            if (a is None) != (b is None) or a is not None and not _close(a, b):
                return False
    return True


def run_case(info, sample, training):
    from eagerc.capture import capture, capture_stats
    torch.manual_seed(0)
    args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    base = info.module_cls(*args, **kwargs)
    base.train(training)
    row = {}
    m_ref = copy.deepcopy(base)
    ref = _run(m_ref, m_ref, sample, training)
    if isinstance(ref, tuple):
        return {"skip": f"eager raises: {ref[1]}"}
    m = copy.deepcopy(base)
    cap = capture(m, backend="eager")
    got = _run(cap, m, sample, training)
    stats = capture_stats(cap)
    row["capture_new_exc"] = got[1] if isinstance(got, tuple) else None
    row["capture_equal"] = _equal(got, ref)
    row["capture_whole"] = not stats["stop_reasons"] and stats["eager_runs"] == 0 and \
        row["capture_new_exc"] is None
    row["stop_reasons"] = dict(stats["stop_reasons"])
    row["rerecord"] = stats["misses"] > 1
    row["guard_failures"] = dict(stats["guard_failures"])
    dynamo.reset()
    m = copy.deepcopy(base)
    got = _run(torch.compile(m, fullgraph=True, backend="eager"), m, sample, training)
    row["dynamo_whole"] = not isinstance(got, tuple)
    row["dynamo_equal"] = _equal(got, ref)
    row["dynamo_reason"] = got[1] if isinstance(got, tuple) else None
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per case")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    from torch.testing._internal.common_modules import module_db
    rows = []
    for info in module_db:
        name = info.module_cls.__name__
        if args.only and name not in args.only.split(","):
            continue
        for mode, samples in zip(("infer", "train"), _samples(info, args.samples)):
            if mode == "train" and name in RANDOM_IN_TRAIN:
                continue
            for i, sample in enumerate(samples):
                signal.signal(signal.SIGALRM, _alarm)
                signal.alarm(args.timeout)
                try:
                    row = run_case(info, sample, mode == "train")
                except Timeout:
                    row = {"skip": f"timeout ({args.timeout} s)"}
                except Exception as e:  # noqa: BLE001 - a module that cannot be built
                    row = {"skip": f"cannot build: {type(e).__name__}"}
                finally:
                    signal.alarm(0)
                row["name"] = f"{name}[{i}] {mode}"
                rows.append(row)
                print(f"# {row}", file=sys.stderr, flush=True)
    print(table(rows))


def table(rows):
    done = [r for r in rows if "skip" not in r]
    n = len(done)
    lines = [f"cases run: {n} (skipped {len(rows) - n})", ""]
    for mode in ("infer", "train"):
        part = [r for r in done if r["name"].endswith(mode)]
        k = len(part)

        def pct(key):
            c = sum(bool(r.get(key)) for r in part)
            return f"{c}/{k} ({100 * c / max(k, 1):.0f}%)"
        lines += [f"| {mode} ({k} cases) | eagerc.capture | Dynamo (fullgraph, eager) |",
                  "|---|---|---|", f"| whole-graph | {pct('capture_whole')} | {pct('dynamo_whole')} |",
                  f"| equal to eager | {pct('capture_equal')} | {pct('dynamo_equal')} |",
                  f"| new exceptions | {sum(bool(r.get('capture_new_exc')) for r in part)} | |",
                  f"| re-record on identical calls | {sum(bool(r.get('rerecord')) for r in part)} | |",
                  ""]
    reasons = collections.Counter(k for r in done for k in r.get("stop_reasons", {}))
    lines += ["Capture stop reasons, by cases:", ""] + \
        [f"- {c} × {k}" for k, c in reasons.most_common()] + [""]
    lines += ["Re-records on identical calls (the check that missed):", ""] + \
        [f"- {r['name']}: {'; '.join(r.get('guard_failures', {}))[:160] or 'no reason'}"
         for r in done if r.get("rerecord")] + [""]
    bad = [r for r in done if not r["capture_equal"] or r.get("capture_new_exc")]
    lines += ["Cases not equal to eager or raising under capture:", ""] + \
        [f"- {r['name']}: {r.get('capture_new_exc') or 'values'}" for r in bad]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
