"""Hit cost of eagerc's compiled kernels against native eager, same process.

    python tools/bench_hit.py [--size 64] [--repeats 200] [--device cpu]

For each op (kernel compiled first): `repeats` alternating rounds, each one sample of the
mean time of one call in a loop of `inner` calls natively, then one with eagerc enabled for
that op; medians of both. Prints a table with the ratio eagerc / native.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import eagerc


def _sample_us(fn, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner * 1e6


def cases(size: int, device: str):
    x = torch.randn(size, size, device=device)
    y = torch.randn(size, size, device=device)
    return [
        ("abs", "aten::abs", lambda: torch.abs(x)),
        ("add(alpha=2)", "aten::add.Tensor", lambda: torch.add(x, y, alpha=2)),
        ("sum(dim=1)", "aten::sum.dim_IntList", lambda: torch.sum(x, dim=1)),
        ("softmax", "aten::_softmax", lambda: torch.softmax(x, dim=-1)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--inner", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {args.size}x{args.size} float32, "
          f"device {args.device}")
    print(f"{'op':<14} {'native us':>10} {'eagerc us':>10} {'ratio':>7}")
    key = "CPU" if args.device == "cpu" else "CUDA"
    for name, op, fn in cases(args.size, args.device):
        with eagerc.enabled(args.device, ops=[op]):
            fn()  # compile (or load from the cache)
        compiles = eagerc.stats()["compiles"]
        native, compiled = [], []
        for _ in range(args.repeats):  # alternating rounds: load drifts hit both sides alike
            for _ in range(3):
                fn()
            native.append(_sample_us(fn, args.inner))
            sync()
            with eagerc.enabled(args.device, ops=[op]):
                for _ in range(3):
                    fn()
                compiled.append(_sample_us(fn, args.inner))
                sync()
        assert eagerc.stats()["compiles"] == compiles, "a hit recompiled"
        assert eagerc.stats()["ops"][f"{op}@{key}"]["hits"] > 0
        n, c = statistics.median(native), statistics.median(compiled)
        print(f"{name:<14} {n:>10.2f} {c:>10.2f} {c / n:>7.2f}")


if __name__ == "__main__":
    main()
