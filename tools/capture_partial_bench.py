"""What partial capture of a stopped call's own ops costs or saves (docs/capture.md).

A call that stops (here: `print`) runs its Python code eagerly on every hit; its child
modules are captured on their own, and its own tensor ops are replayed as compiled segment
graphs (eagerc/capture/stream.py, stream_replay.py). This measures, in one process, a steady-state
call of: eager; capture without segment replay (child modules only); capture with it.

    python tools/capture_partial_bench.py --iters 200
"""
import argparse
import io
import statistics
import time

import torch
import torch.nn as nn

SINK = io.StringIO()


def own_ops(n):
    """Ten elementwise ops and a reduction around a print: no child modules."""
    def f(x):
        h = (x * 2 + 1).relu().sin() * 0.5
        m = h.amax().item()
        print("max", m, file=SINK)
        y = (x / (m + 1)).tanh()
        return (y * h + x).sigmoid() - 0.5
    return f, (torch.randn(n, n),)


class Net(nn.Module):
    """Children (captured on their own) with elementwise code of the forward between them."""

    def __init__(self, d):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList([nn.Linear(d, d) for _ in range(4)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = self.enc(x) * 0.5
        print("norm", float(h.norm()), file=SINK)
        for blk in self.blocks:
            h = (blk(h).tanh() + h) * 0.5
        return self.norm(h).softmax(-1)


def programs():
    yield "own ops 64x64", *own_ops(64)
    yield "own ops 512x512", *own_ops(512)
    d = 64
    yield "Net d=64 bs=8", Net(d).eval(), (torch.randn(8, d),)


def timed(fn, args, iters, rounds=7):
    with torch.no_grad():
        for _ in range(5):
            fn(*args)
        runs = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn(*args)
            runs.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(runs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--backend", default="inductor", help="inductor or eager")
    a = ap.parse_args(argv)
    from eagerc.capture import capture, capture_stats, partial_capture

    torch.set_num_threads(1)
    print("| program | eager µs | capture, children only µs | capture + segments µs | "
          "ops answered per call |")
    print("|---|---|---|---|---|")
    for name, fn, args in programs():
        eager = timed(fn, args, a.iters)
        plain = partial_capture._stream_mode
        partial_capture._stream_mode = lambda *_: None  # the replay off: children only
        try:
            children = timed(capture(fn, backend=a.backend), args, a.iters)
        finally:
            partial_capture._stream_mode = plain
        cap = capture(fn, backend=a.backend)
        segs = timed(cap, args, a.iters)
        s = capture_stats(cap)
        per_call = s["segment_ops"] / max(s["segment_runs"], 1)
        print(f"| {name} | {eager:.0f} | {children:.0f} | {segs:.0f} | {per_call:.0f} |")


if __name__ == "__main__":
    main()
