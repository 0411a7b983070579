"""Where the eagerc device's forward spends host time over native eager's, by Python entry
point: each side's forward under cProfile, own time per function and per C entry point
(``torch._C._nn.linear``, ``torch.conv2d``, ...) per forward, ranked by device minus native;
then, for the entry points asked for, their host time inside the forward itself (each call
wrapped in place, alternating rounds, medians).

    EAGERC_BACKING=cuda python tools/device_forward_gap.py --models bert,gpt2,resnet50
    EAGERC_BENCH_DEVICE=cpu python tools/device_forward_gap.py --models bert   # host memory

A forward at batch 1 is launch-bound, so its time is the sum of these host times. An entry
point that costs more inside the forward than alone (tools/bench_hit.py) pays for what the
calls between its own evict. Comparing the two sides' cProfile totals is fair: the profiler
adds the same cost per Python call to both.
"""
from __future__ import annotations

import argparse
import copy
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import eagerc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu_models import DEV, build_model  # noqa: E402

SYNC = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
# Entry points that can be timed inside the forward: (module, attribute) replaced for it.
WRAPPABLE = {"sdpa": (F, "scaled_dot_product_attention"), "conv2d": (F, "conv2d"),
             "linear": (F, "linear"), "layer_norm": (F, "layer_norm")}


def _profile(forward, forwards: int) -> dict:
    """{function: (calls, own µs)} per forward."""
    forward()
    SYNC()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(forwards):
        forward()
    SYNC()
    profile.disable()
    out = {}
    for (file, line, name), (_, calls, own, _, _) in pstats.Stats(profile).stats.items():
        where = f"{os.path.basename(file)}:{line}({name})" if line else name
        out[where] = (calls / forwards, own / forwards * 1e6)
    return out


def profile_gap(sides: dict, forwards: int, top: int) -> None:
    # Two profiles a side, alternating, averaged: one profiled run wanders by a few percent.
    runs = {side: [] for side in sides}
    for _ in range(2):
        for side, forward in sides.items():
            runs[side].append(_profile(forward, forwards))
    names = set().union(*(set(r) for rs in runs.values() for r in rs))

    def own(side, name):
        return statistics.fmean(r.get(name, (0, 0.0))[1] for r in runs[side])

    rows = sorted(((own("device", n) - own("native", n), n) for n in names), key=lambda r: -abs(r[0]))
    total = {side: sum(own(side, n) for n in names) for side in sides}
    print(f"   cProfile own time per forward: native {total['native']:.0f} us, device "
          f"{total['device']:.0f} us ({total['device'] - total['native']:+.0f})")
    for diff, name in rows[:top]:
        calls = runs["device"][0].get(name, runs["native"][0].get(name, (0, 0)))[0]
        print(f"   {diff:+8.1f} us  {calls:5.0f} calls  native {own('native', name):8.1f}  "
              f"device {own('device', name):8.1f}  {name[:100]}")


def in_forward(sides: dict, entry: str, rounds: int) -> None:
    module, attribute = WRAPPABLE[entry]
    original = getattr(module, attribute)
    spent = {"seconds": 0.0, "calls": 0}

    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = original(*args, **kwargs)
        spent["seconds"] += time.perf_counter() - start
        spent["calls"] += 1
        return result

    setattr(module, attribute, timed)
    try:
        per_call = {side: [] for side in sides}
        for _ in range(rounds):
            for side, forward in sides.items():
                spent["seconds"], spent["calls"] = 0.0, 0
                for _ in range(3):
                    forward()
                SYNC()
                per_call[side].append(spent["seconds"] / max(spent["calls"], 1) * 1e6)
    finally:
        setattr(module, attribute, original)
    if spent["calls"] == 0:
        print(f"   {entry}: no calls in this forward")
        return
    native, device = (statistics.median(per_call[s]) for s in ("native", "device"))
    print(f"   {entry} inside the forward: native {native:.2f} us, device {device:.2f} us a call "
          f"({device - native:+.2f}), {spent['calls'] // 3} calls a forward")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--forwards", type=int, default=10, help="profiled forwards a side")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--entries", default="sdpa,conv2d,linear",
                        help=f"entry points to time inside the forward, of {sorted(WRAPPABLE)}")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, inputs = build_model(name, 1)
        on_device = copy.deepcopy(model).to("eagerc")
        device_inputs = {k: v.to("eagerc") for k, v in inputs.items()}
        with torch.no_grad():
            sides = {"native": lambda: model(**inputs), "device": lambda: on_device(**device_inputs)}
            for forward in sides.values():
                for _ in range(3):
                    forward()  # the device compiles what it lacks here
            print(f"== {name} (batch 1, {DEV} against the eagerc device)", flush=True)
            profile_gap(sides, args.forwards, args.top)
            for entry in filter(None, args.entries.split(",")):
                in_forward(sides, entry, args.rounds)
        del model, on_device
        if DEV == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
