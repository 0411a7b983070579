"""The demo behind README's first command: a real model on the eagerc device.

A Hugging Face transformers BERT (small config, random weights: nothing is downloaded)
runs on the "eagerc" device, whose compute kernels are all compiled by eagerc. The first
run compiles (or loads from the disk cache) every kernel it needs, each compile logged as
it finishes (and counted on a progress bar on a terminal); the second shows only cache
hits; then warm runs are timed against CPU eager on the same machine.
"""
from __future__ import annotations

import logging
import statistics
import sys
import time

import torch

import eagerc
from eagerc import _console
from eagerc.targets import served_device
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


class _CompileBar(logging.Handler):
    """Advances a progress bar on each compile the cache service logs
    ("eagerc: compiled <op(signature)> in <s> s", eagerc/cache.py); the line itself
    reaches the console through the CLI's handler."""

    def __init__(self, bar):
        super().__init__(logging.INFO)
        self.bar = bar

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith("eagerc: compiled ") and record.args:
            self.bar.set_postfix_str(str(record.args[0]).split("(", 1)[0], refresh=False)
            self.bar.update(1)


def _with_compile_bar(fn):
    """Runs `fn()`; on a terminal a bar counts the kernels compiled meanwhile."""
    if not _console.on_terminal():
        return fn()
    from tqdm import tqdm

    bar = tqdm(desc="kernels compiled", unit=" kernels", file=sys.stderr, leave=False)
    handler = _CompileBar(bar)
    logger = logging.getLogger("eagerc")
    logger.addHandler(handler)
    try:
        return fn()
    finally:
        logger.removeHandler(handler)
        bar.close()


def op_rows(ops: dict) -> list:
    """(op as a reader names it, counters) per stats entry: the dispatch key that
    `eagerc.stats()` keys ops by ("aten::add.Tensor@PrivateUse1") becomes the device's
    name, shown only where it is not the device every other row is on."""
    named = []
    for key, s in sorted(ops.items()):
        op, _, dispatch_key = key.partition("@")
        named.append((op, served_device(dispatch_key).lower() if dispatch_key else "", s))
    devices = {d for _, d, _ in named}
    return [(op if len(devices) == 1 else f"{op} ({device})", s) for op, device, s in named]


def speed_words(device_ms: float, cpu_ms: float) -> str:
    """'1.26x faster than CPU eager' / '2.04x slower than CPU eager'."""
    if device_ms <= cpu_ms:
        return f"{cpu_ms / device_ms:.2f}x faster than CPU eager"
    return f"{device_ms / cpu_ms:.2f}x slower than CPU eager"


def table(rows: list) -> list:
    """The first run's per-op table as lines; the op column as wide as its longest name."""
    width = max([len("op")] + [len(name) for name, _ in rows])
    lines = [f"{'op':<{width}}  {'calls':>6}  {'compiled':>8}  {'from disk':>9}  {'fallback':>8}"]
    for name, s in rows:
        lines.append(f"{name:<{width}}  {s['hits'] + s['misses']:>6}  {s['compiles']:>8}  "
                     f"{s['disk_loads']:>9}  {s['fallbacks']:>8}")
        lines += [f"    fallback: {reason}" for reason in s["fallback_reasons"]]
    return lines


def _step(text: str, state: dict) -> None:
    """A step's line on stderr as it starts; the heartbeat repeats what is running."""
    state["step"] = text
    print(text, file=sys.stderr, flush=True)
    _console.mark_line()


def run_demo(device=None, runs: int = 20) -> int:
    device = device or ("eagerc" if torch._C._get_privateuse1_backend_name() == "eagerc" else "cpu")
    print(f"eagerc demo: transformers BertModel (2 layers, hidden 64, random weights), input_ids (2, 32), "
          f"device {device}, torch {torch.__version__}", flush=True)
    state = {"step": ""}
    with _console.heartbeat(lambda: f"still: {state['step']}"):
        _step("building the model (importing transformers takes a few seconds)", state)
        model, inputs = _bert()
        with torch.no_grad():
            _step(f"timing CPU eager ({runs} runs), the reference", state)
            expected = model(**inputs).last_hidden_state
            cpu_ms = _time_ms(lambda: model(**inputs), runs)
            if device == "cpu":
                eagerc.enable("cpu")
            model = model.to(device)
            dev_inputs = {k: v.to(device) for k, v in inputs.items()}
            _step("first run: each op BERT needs is answered at once (ATen's kernel) while Inductor "
                  "compiles its kernel in the compile service, or loaded from the disk cache if an "
                  "earlier run compiled it (EAGERC_COMPILE=now: compiled before answering)", state)
            eagerc.reset_stats()
            t0 = time.perf_counter()
            cold = _with_compile_bar(lambda: model(**dev_inputs).last_hidden_state)
            cold_s = time.perf_counter() - t0
            first = eagerc.stats()
            t0 = time.perf_counter()
            eagerc.wait_compiles()  # the compile service's jobs (the default mode), if any
            background_s = time.perf_counter() - t0
            if first["interim"]:
                model(**dev_inputs)     # kernels on CPU aliases (mm) meet their own signature now
                eagerc.wait_compiles()
            _step(f"second run, then {runs} timed warm runs", state)
            eagerc.reset_stats()
            warm = model(**dev_inputs).last_hidden_state
            second = eagerc.stats()
            warm_ms = _time_ms(lambda: model(**dev_inputs), runs)
            if device == "cpu":
                eagerc.disable("cpu")
    assert_close(cold.cpu(), expected, model=True)
    assert_close(warm.cpu(), expected, model=True)
    print(f"\nfirst run ({cold_s:.1f} s): {first['compiles']} kernels compiled, "
          f"{first['disk_loads']} loaded from the disk cache, {first['fallbacks']} fallbacks"
          + (f", {first['interim']} calls served by ATen's CPU kernels while the compile "
             f"service compiled theirs (all ready {background_s:.1f} s later)"
             if first["interim"] else ""))
    print("\n".join(table(op_rows(first["ops"]))))
    print(f"\nsecond run: {second['hits']} cache hits, {second['misses']} misses, "
          f"{second['compiles']} compiles, {second['fallbacks']} fallbacks")
    print(f"warm run: {warm_ms:.2f} ms on {device} vs {cpu_ms:.2f} ms on CPU eager "
          f"({speed_words(warm_ms, cpu_ms)}, median of {runs}); outputs match CPU eager")
    return 0
