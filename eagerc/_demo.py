"""The demo behind README's first command: a real model on compiled kernels.

Runs a small MLP classifier (torch.nn Linear, GELU, LayerNorm, log_softmax; random weights) on the CPU with every op
served by eagerc: the first run compiles (or loads from the disk cache) each kernel it
needs, the second shows only cache hits, then warm runs are timed against native eager.
"""
from __future__ import annotations

import statistics
import time

import torch

import eagerc
from eagerc.testing import assert_close


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
        torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
        torch.nn.Linear(256, 10), torch.nn.LogSoftmax(dim=-1),
    ).eval()


def _time_ms(fn, runs):
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def run_demo(device=None, runs: int = 20) -> int:
    device = device or "cpu"
    model, x = _model(), torch.randn(32, 64)
    with torch.no_grad():
        expected = model(x)
        native_ms = _time_ms(lambda: model(x), runs)
        eagerc.reset_stats()
        with eagerc.enabled(device):
            t0 = time.perf_counter()
            cold = model(x)
            cold_s = time.perf_counter() - t0
            first = eagerc.stats()
            eagerc.reset_stats()
            warm = model(x)
            second = eagerc.stats()
            warm_ms = _time_ms(lambda: model(x), runs)
    assert_close(cold, expected, model=True)
    assert_close(warm, expected, model=True)
    print(f"eagerc demo: 3-layer MLP classifier, input {tuple(x.shape)}, device {device}, "
          f"torch {torch.__version__}")
    print(f"\nfirst run ({cold_s:.1f} s): {first['compiles']} kernels compiled, "
          f"{first['disk_loads']} loaded from the disk cache, {first['fallbacks']} native fallbacks")
    print(f"{'op':<38} {'calls':>6} {'compiled':>9} {'from disk':>9} {'fallback':>9}")
    for name, s in sorted(first["ops"].items()):
        print(f"{name:<38} {s['hits'] + s['misses']:>6} {s['compiles']:>9} {s['disk_loads']:>9} {s['fallbacks']:>9}")
        for reason in s["fallback_reasons"]:
            print(f"    fallback: {reason}")
    print(f"\nsecond run: {second['hits']} cache hits, {second['misses']} misses, "
          f"{second['compiles']} compiles, {second['fallbacks']} fallbacks")
    print(f"warm run: {warm_ms:.2f} ms on eagerc vs {native_ms:.2f} ms native eager "
          f"({warm_ms / native_ms:.2f}x), outputs match native")
    return 0
