"""The demo behind README's first command: a real model on the eagerc device.

A Hugging Face transformers BERT (small config, random weights: nothing is downloaded)
runs on the "eagerc" device, whose compute kernels are all compiled by eagerc. The first
run compiles (or loads from the disk cache) every kernel it needs; the second shows only
cache hits; then warm runs are timed against CPU eager on the same machine.
"""
from __future__ import annotations

import statistics
import time

import torch

import eagerc
from eagerc.testing import assert_close


def _bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=1000, max_position_embeddings=128)
    return BertModel(config).eval(), {"input_ids": torch.randint(0, 1000, (2, 32))}


def _time_ms(fn, runs):
    fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def run_demo(device=None, runs: int = 20) -> int:
    device = device or ("eagerc" if torch._C._get_privateuse1_backend_name() == "eagerc" else "cpu")
    model, inputs = _bert()
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
        cpu_ms = _time_ms(lambda: model(**inputs), runs)
        if device == "cpu":
            eagerc.enable("cpu")
        model = model.to(device)
        dev_inputs = {k: v.to(device) for k, v in inputs.items()}
        eagerc.reset_stats()
        t0 = time.perf_counter()
        cold = model(**dev_inputs).last_hidden_state
        cold_s = time.perf_counter() - t0
        first = eagerc.stats()
        t0 = time.perf_counter()
        eagerc.wait_compiles()  # background compiles (EAGERC_COMPILE=background), if any
        background_s = time.perf_counter() - t0
        eagerc.reset_stats()
        model(**dev_inputs)     # kernels on CPU aliases (mm) meet their own signature now
        eagerc.wait_compiles()
        eagerc.reset_stats()
        warm = model(**dev_inputs).last_hidden_state
        second = eagerc.stats()
        warm_ms = _time_ms(lambda: model(**dev_inputs), runs)
        if device == "cpu":
            eagerc.disable("cpu")
    assert_close(cold.cpu(), expected, model=True)
    assert_close(warm.cpu(), expected, model=True)
    print(f"eagerc demo: transformers BertModel (2 layers, hidden 64, random weights), input_ids (2, 32), "
          f"device {device}, torch {torch.__version__}")
    print(f"\nfirst run ({cold_s:.1f} s): {first['compiles']} kernels compiled, "
          f"{first['disk_loads']} loaded from the disk cache, {first['fallbacks']} fallbacks"
          + (f", {first['interim']} calls served by ATen's CPU kernels while their kernels "
             f"compiled in the background (EAGERC_COMPILE=background; all ready "
             f"{background_s:.1f} s later)" if first["interim"] else ""))
    print(f"{'op':<44} {'calls':>6} {'compiled':>9} {'from disk':>9} {'fallback':>9}")
    for name, s in sorted(first["ops"].items()):
        print(f"{name:<44} {s['hits'] + s['misses']:>6} {s['compiles']:>9} {s['disk_loads']:>9} {s['fallbacks']:>9}")
        for reason in s["fallback_reasons"]:
            print(f"    fallback: {reason}")
    print(f"\nsecond run: {second['hits']} cache hits, {second['misses']} misses, "
          f"{second['compiles']} compiles, {second['fallbacks']} fallbacks")
    print(f"warm run: {warm_ms:.2f} ms on {device} vs {cpu_ms:.2f} ms CPU eager "
          f"({warm_ms / cpu_ms:.2f}x); outputs match CPU eager")
    return 0
