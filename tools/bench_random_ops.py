"""Random ops on the eagerc device against CPU eager, same process, one thread.

    python tools/bench_random_ops.py [--compiled] [--rounds 5]

For randn, rand, normal_ and training dropout at 64x64 and 256x256 float32: `rounds`
alternating rounds, each the mean time of one call in a loop on the device, then the same
call on CPU; medians of both and their ratio. The device serves random ops with ATen's CPU
kernel on aliases (docs/architecture.md); ``--compiled`` serves them as a device with
aliases off does, with kernels compiled through Inductor's seed pass, to show what that
costs on the host.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("EAGERC_COMPILE", "now")  # warm-up misses compile before answering

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import eagerc  # noqa: E402
from eagerc.per_op import registration  # noqa: E402

SIZES = {64: 200, 256: 30}  # size -> calls per sample


def calls(n: int, device: str) -> dict:
    x, ones = torch.empty(n, n, device=device), torch.ones(n, n, device=device)
    return {"randn": lambda: torch.randn(n, n, device=device),
            "rand": lambda: torch.rand(n, n, device=device),
            "normal_": lambda: x.normal_(),
            "dropout": lambda: F.dropout(ones, 0.1, training=True)}


def sample(fn, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compiled", action="store_true",
                        help="compile the device's random ops (Inductor's seed pass)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.compiled:
        eagerc.disable("eagerc")
        registration._random_ops = lambda target: "compiled"
        eagerc.enable("eagerc")
    print(f"{'size':>4} {'op':8} {'device us':>10} {'cpu us':>8} {'ratio':>6}")
    for n, inner in SIZES.items():
        device, cpu = calls(n, "eagerc"), calls(n, "cpu")
        for name in device:
            for fn in (device[name], cpu[name]):
                for _ in range(3):
                    fn()  # the device's first call compiles where it compiles
            times = {"device": [], "cpu": []}
            for _ in range(args.rounds):
                times["device"].append(sample(device[name], inner))
                times["cpu"].append(sample(cpu[name], inner))
            d, c = statistics.median(times["device"]), statistics.median(times["cpu"])
            print(f"{n:4d} {name:8} {d:10.0f} {c:8.0f} {d / c:6.2f}")
    served = {name.split("@")[0]: "compiled" if s["hits"] else "aliased"
              for name, s in eagerc.stats()["ops"].items() if s["hits"] or s["aliased"]}
    print("served:", served)


if __name__ == "__main__":
    main()
