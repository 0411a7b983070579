"""Does the size a GPU kernel was first compiled at decide its speed at other sizes?

    python tools/bench_gpu_tuning.py --first 64 8192      # one fresh process per first size

Each first size runs in a fresh process with empty eagerc, Inductor and Triton caches: it
compiles each reduction on a first x first call, then times 8192x8192 float32 against native
CUDA eager (CUDA events, medians of alternating rounds) and counts the compiles the large
call made. A Triton kernel's launch configuration is tuned on the sizes it is compiled at;
GPU signatures carry a size class (csrc/signature.cpp) so a large call gets its own kernel.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

OPS = {
    "softmax": "lambda t: torch.softmax(t, -1)",
    "log_softmax": "lambda t: F.log_softmax(t, -1)",
    "sum(dim=1)": "lambda t: t.sum(1)",
    "sum(dim=0)": "lambda t: t.sum(0)",
    "layer_norm": "lambda t: F.layer_norm(t, (t.shape[-1],))",
}


def child(first: int, rounds: int) -> None:
    import torch
    import torch.nn.functional as F

    import eagerc

    def events_ms(fn, inner=20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / inner

    big = torch.randn(8192, 8192, device="cuda")
    for name, source in OPS.items():
        fn = eval(source, {"torch": torch, "F": F})
        with eagerc.enabled("cuda"):
            fn(torch.randn(first, first, device="cuda"))
            torch.cuda.synchronize()
            before = eagerc.stats()["compiles"]
            fn(big)
            compiles = eagerc.stats()["compiles"] - before
        native, compiled = [], []
        for _ in range(rounds):
            native.append(events_ms(lambda: fn(big)))
            with eagerc.enabled("cuda"):
                compiled.append(events_ms(lambda: fn(big)))
        n, c = statistics.median(native), statistics.median(compiled)
        print(f"{first:>6} {name:<12} {n:>10.3f} {c:>10.3f} {c / n:>6.2f} {compiles:>9}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", type=int, nargs="+", default=[64, 8192])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.rounds)
    print(f"{'first':>6} {'op':<12} {'native ms':>10} {'eagerc ms':>10} {'ratio':>6} {'compiles':>9}"
          "  (8192x8192 float32; compiles: those the 8192x8192 call made)")
    for first in args.first:
        fresh = tempfile.mkdtemp()
        env = dict(os.environ, EAGERC_CACHE_DIR=f"{fresh}/eagerc", TORCHINDUCTOR_CACHE_DIR=f"{fresh}/inductor",
                   TRITON_CACHE_DIR=f"{fresh}/triton")
        subprocess.run([sys.executable, __file__, "--child", str(first), "--rounds", str(args.rounds)],
                       env=env, check=True)


if __name__ == "__main__":
    main()
