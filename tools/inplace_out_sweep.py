"""In-place and out= forms of OpInfo samples, compared with eager, counting which overloads
compiled and which fell back.

    python tools/inplace_out_sweep.py [--ops mul,logical_not,...] [--per-op 1] [--modes override,device]

For each OpInfo of torch.testing._internal.common_methods_invocations.op_db, float32:
  inplace      OpInfo.inplace_variant on a copy of the sample's input
  inplace_self the same with the sample's first argument replaced by the input itself,
               where it has the input's shape and dtype (x.mul_(x): the written argument is
               the very view of an input)
  out          op(..., out=torch.empty_like(expected)) (supports_out)
  out_empty    op(..., out=torch.empty(0)): the out must be resized
Each call runs in override mode on CPU and on the eagerc device (host memory), twice (the
miss, then a hit), and is compared with CPU eager (tools/op_sweep.py's mismatch: dtype,
shape, strides, values, or the same exception type). eagerc.stats() tells which aten
overloads served the second run: compiled (hits, no fallback) or not (fallback, aliased).
The last lines count the overloads per outcome; run it against two builds to count what
changed (docs/reliability.md has the numbers).
"""
from __future__ import annotations

import argparse
import collections
import itertools
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from op_sweep import _cpu, mismatch  # noqa: E402

FORMS = ("inplace", "inplace_self", "out", "out_empty")


def _move(value, device):
    """A copy on `device` (a copy on CPU too: in-place forms write into it)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device) for v in value)
    if isinstance(value, torch.device):  # factories' samples pass device=
        return torch.device(device)
    return value


def _outcome(call):
    try:
        return "ok", _cpu(call())
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return type(e).__name__, str(e).splitlines()[0] if str(e) else ""


def _calls(info, sample, device, expected=None):
    """form -> a call of that form on `device` (forms the OpInfo and sample allow);
    `expected`: eager's result of the sample on CPU (the out= forms' dtype and shape)."""
    def args():
        kwargs = {k: (device if k == "device" else _move(v, device)) for k, v in sample.kwargs.items()}
        return _move(sample.input, device), [_move(a, device) for a in sample.args], kwargs

    calls = {}
    if info.inplace_variant is not None and isinstance(sample.input, torch.Tensor):
        def inplace():
            x, a, kw = args()
            return info.inplace_variant(x, *a, **kw)
        calls["inplace"] = inplace
        first = sample.args[0] if sample.args else None
        if isinstance(first, torch.Tensor) and first.shape == sample.input.shape \
                and first.dtype == sample.input.dtype:
            def inplace_self():
                x, a, kw = args()
                return info.inplace_variant(x, x, *a[1:], **kw)
            calls["inplace_self"] = inplace_self
    if info.supports_out and isinstance(expected, torch.Tensor):
        def with_out(empty):
            def call():
                x, a, kw = args()
                out = torch.empty(0 if empty else expected.shape, dtype=expected.dtype, device=device)
                return info.op(x, *a, **kw, out=out)
            return call
        calls["out"] = with_out(False)
        calls["out_empty"] = with_out(True)
    return calls


def _counts():
    import eagerc

    return {name: (s.get("hits", 0), s.get("fallbacks", 0) + s.get("aliased", 0))
            for name, s in eagerc.stats()["ops"].items()}


def _served(before, after):
    """aten overload -> 'compiled' | 'fallback' for the overloads a call reached."""
    out = {}
    for name, (hits, falls) in after.items():
        h0, f0 = before.get(name, (0, 0))
        if falls > f0:
            out[name] = "fallback"
        elif hits > h0:
            out[name] = "compiled"
    return out


def run(names, per_op, modes):
    import eagerc
    from torch.testing._internal.common_methods_invocations import op_db

    results = collections.defaultdict(lambda: collections.Counter())  # (mode, overload) -> outcomes
    bad = collections.Counter()
    total = 0
    for info in op_db:
        if names is not None and info.name not in names:
            continue
        if torch.float32 not in info.supported_dtypes("cpu"):
            continue
        try:
            samples = list(itertools.islice(info.sample_inputs("cpu", torch.float32), per_op))
        except Exception:  # noqa: BLE001 - a sample generator that cannot run here
            continue
        for k, sample in enumerate(samples):
            with eagerc.enabled("cpu", ops=[]):  # nothing served: CPU's own kernels
                expected = _outcome(lambda: info.op(_move(sample.input, "cpu"), *_move(sample.args, "cpu"),
                                                    **_move(sample.kwargs, "cpu")))[1]
            for form in FORMS:
                cpu_calls = _calls(info, sample, "cpu", expected)
                if form not in cpu_calls:
                    continue
                torch.manual_seed(0)
                with eagerc.enabled("cpu", ops=[]):
                    want = _outcome(cpu_calls[form])
                total += 1
                for mode in modes:
                    device = "cpu" if mode == "override" else "eagerc"
                    call = _calls(info, sample, device, expected)[form]
                    why, served = None, {}
                    for attempt in range(2):
                        torch.manual_seed(0)
                        before = _counts()
                        if mode == "override":
                            with eagerc.enabled("cpu"):
                                got = _outcome(call)
                        else:
                            got = _outcome(call)
                        why = why or mismatch(want, got)
                        if attempt == 1:
                            served = _served(before, _counts())
                    for overload, how in served.items():
                        results[(mode, form, overload)][how] += 1
                    status = "MISMATCH" if why else "ok"
                    if why:
                        bad[mode] += 1
                    print(f"{status} {mode:8} {form:12} {info.name} sample {k}: "
                          f"{why or ''} {sorted(served.items())}", flush=True)
    return total, bad, results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--per-op", type=int, default=1, help="samples per OpInfo")
    parser.add_argument("--modes", default="override,device")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    names = set(args.ops.split(",")) if args.ops else None
    total, bad, results = run(names, args.per_op, args.modes.split(","))
    per_overload = collections.defaultdict(collections.Counter)
    for (mode, form, overload), outcomes in sorted(results.items()):
        # An overload fell back if any of its calls did.
        how = "fallback" if outcomes["fallback"] else "compiled"
        per_overload[(mode, form)][how] += 1
        print(f"OVERLOAD {mode} {form} {overload} {how} {dict(outcomes)}")
    for (mode, form), counts in sorted(per_overload.items()):
        print(f"SUMMARY {mode} {form}: compiled {counts['compiled']}, fallback {counts['fallback']}")
    print(f"cases {total}; mismatches: " + ", ".join(f"{m} {bad[m]}" for m in args.modes.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
