"""Warm forwards on the eagerc device (host memory) against CPU eager, same process.

    python tools/bench_models_cpu.py [--models bert,gpt2,vit,resnet,llama] [--rounds 30]
                                     [--inner 5] [--threads 1] [--clock wall|thread]
                                     [--profile] [--top 15]

The models are device_model_report.py's (transformers, small configs, random weights,
inference). Each model is moved to the eagerc device, its kernels compiled or loaded by a
first forward (checked against CPU eager), then `rounds` alternating rounds: one sample of
the mean of `inner` forwards on CPU and one on eagerc, in turn first (load drifts hit both
alike, and neither side always runs right after the other). Prints the medians and their
ratio. `--clock thread` (1 thread only) times with the thread's CPU time instead of the wall
clock: on a busy machine, time the process spends descheduled then counts for neither side.
`--profile` adds torch.profiler's per-op self time per forward on both sides: where the
remaining time goes.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_model_report import MODELS, _profile, build, profile_table  # noqa: E402

import eagerc  # noqa: E402
from eagerc.testing import assert_close  # noqa: E402


_CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def _mean_ms(fn, inner: int, clock=time.perf_counter) -> float:
    t0 = clock()
    for _ in range(inner):
        fn()
    return (clock() - t0) / inner * 1e3


def measure(name: str, rounds: int, inner: int, do_profile: bool, top: int,
            clock: str = "wall") -> dict:
    model, inputs = build(name)
    model.eval()
    dev_model = copy.deepcopy(model).to("eagerc")
    dev_inputs = {k: v.to("eagerc") for k, v in inputs.items()}
    with torch.no_grad():
        eagerc.reset_stats()
        got = dev_model(**dev_inputs)
        assert_close(got[0].cpu(), model(**inputs)[0], model=True)
        compiles = eagerc.stats()["compiles"]

        def cpu():
            return model(**inputs)

        def dev():
            return dev_model(**dev_inputs)

        for _ in range(3):
            cpu(), dev()
        cpu_ms, dev_ms = [], []
        tick = _CLOCKS[clock]
        for r in range(rounds):
            sides = ((cpu, cpu_ms), (dev, dev_ms))
            for fn, samples in (sides if r % 2 == 0 else sides[::-1]):
                samples.append(_mean_ms(fn, inner, tick))
        assert eagerc.stats()["compiles"] == compiles, "a warm forward compiled"
        table = profile_table(_profile(dev, 20), _profile(cpu, 20), top) if do_profile else ""
    st = eagerc.stats()
    return {"model": name, "cpu_ms": statistics.median(cpu_ms), "dev_ms": statistics.median(dev_ms),
            "fallbacks": st["fallbacks"], "aliased": st["aliased"], "profile": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: leave)")
    parser.add_argument("--clock", choices=sorted(_CLOCKS), default="wall",
                        help="wall: perf_counter; thread: the thread's CPU time")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread counts the calling thread only: use it with --threads 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {os.cpu_count()} cores; "
          f"median of {args.rounds} alternating rounds of {args.inner} forwards, {args.clock} clock")
    print("| model | CPU eager ms | eagerc ms | eagerc / CPU | aliased calls |")
    print("|---|---|---|---|---|")
    results = []
    for name in args.models.split(","):
        r = measure(name, args.rounds, args.inner, args.profile, args.top, args.clock)
        results.append(r)
        print(f"| {name} | {r['cpu_ms']:.3f} | {r['dev_ms']:.3f} | {r['dev_ms'] / r['cpu_ms']:.2f}x "
              f"| {r['aliased']} |", flush=True)
    for r in results:
        if r["profile"]:
            print(f"\n#### {r['model']}: self time per forward (us), eagerc vs CPU\n\n{r['profile']}")


if __name__ == "__main__":
    main()
