"""Model benchmarks of tools/bench_gpu.py (`models`, `device-models`, `subsets`) and what they share with
its other subcommands: the device, alternating rounds, the model builder. Run them through
bench_gpu.py (`python tools/bench_gpu.py models|device-models ...`), which imports this module.
"""
from __future__ import annotations

import copy
import os
import statistics
import subprocess
import sys
import time

import torch

import eagerc

DEV = os.environ.get("EAGERC_BENCH_DEVICE", "cuda")  # "cpu": a dry run of the script off the GPU machine
BENCH_GPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_gpu.py")  # child processes run its CLI


def _alternate(native, compiled, rounds: int, measure):
    """Median of `measure(fn)` over alternating rounds; eagerc rounds run enabled. Each
    round first calls its side once untimed: enabling and disabling re-register ~1,000
    kernels, and the first call after that pays for cold dispatch tables and caches."""
    a, b = [], []
    for _ in range(rounds):
        native()
        a.append(measure(native))
        with eagerc.enabled(DEV):
            compiled()
            b.append(measure(compiled))
    return statistics.median(a), statistics.median(b)


# ------------------------------------------------------------------ models

def build_model(name: str, batch: int):
    import transformers

    if name == "bert":
        model = transformers.BertModel(transformers.BertConfig())
        inputs = {"input_ids": torch.randint(0, 30000, (batch, 128))}
    elif name == "gpt2":
        model = transformers.GPT2Model(transformers.GPT2Config(use_cache=False))
        inputs = {"input_ids": torch.randint(0, 50000, (batch, 128))}
    elif name == "resnet50":
        model = transformers.ResNetModel(transformers.ResNetConfig())  # the ResNet-50 layout
        inputs = {"pixel_values": torch.randn(batch, 3, 224, 224)}
    else:
        raise ValueError(name)
    return model.eval().to(DEV), {k: v.to(DEV) for k, v in inputs.items()}


def _first_tensor(out):
    return out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))


def _wall_ms(fn, inner: int = 1) -> float:
    """Wall time of one forward: the mean of `inner` forwards back to back, synchronized
    before and after (a batch-1 forward is launch-bound: its host time is the time)."""
    sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e3 / inner


def _model_cases(args):
    """(name, batch, model, inputs) for every model and batch asked for, TF32 off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            torch.manual_seed(0)
            yield (name, batch, *build_model(name, batch))


def bench_models(args) -> None:
    print(f"{'model':<10} {'batch':>5} {'native ms':>10} {'eagerc ms':>10} {'ratio':>6} "
          f"{'compile ms':>11} {'capture ms':>11} {'ratio':>6} {'max err':>9}")
    for name, batch, model, inputs in _model_cases(args):
        with torch.no_grad():
            fwd = lambda: model(**inputs)  # noqa: E731
            want = _first_tensor(fwd())
            with eagerc.enabled(DEV):
                got = _first_tensor(fwd())  # compiles what is missing
            err = (got - want).abs().max().item()
            for _ in range(2):
                fwd()
                with eagerc.enabled(DEV):
                    fwd()
            nat, eag = _alternate(fwd, fwd, args.rounds, lambda f: _wall_ms(f, args.inner))
            compiled = captured = None
            tc = cap = float("nan")
            if not args.eager_only:  # torch.compile and capture, whole-model compilers
                compiled = torch.compile(model)
                captured = eagerc.capture(model)
                for _ in range(3):
                    compiled(**inputs), captured(**inputs)
                tc, cap = [], []
                for _ in range(args.rounds):
                    tc.append(_wall_ms(lambda: compiled(**inputs), args.inner))
                    cap.append(_wall_ms(lambda: captured(**inputs), args.inner))
                tc, cap = statistics.median(tc), statistics.median(cap)
        print(f"{name:<10} {batch:>5} {nat:>10.2f} {eag:>10.2f} {eag / nat:>6.2f} "
              f"{tc:>11.2f} {cap:>11.2f} {cap / tc:>6.2f} {err:>9.1e}", flush=True)
        stats = eagerc.stats()
        falls = {k: v["fallback_reasons"] for k, v in stats["ops"].items() if v["fallbacks"]}
        if falls:
            print("   fallbacks:", {k: list(v)[:1] for k, v in list(falls.items())[:8]})
        if args.profile and compiled is not None:  # where capture and torch.compile differ
            with torch.no_grad():
                _print_profile({"torch.compile": lambda: compiled(**inputs),
                                "capture": lambda: captured(**inputs)}, top=15)
        elif args.profile:  # where override mode and native differ (host time per op)
            with torch.no_grad():
                with eagerc.enabled(DEV):
                    fwd()
                    _print_profile({"override": fwd})
                _print_profile({"native": fwd})
        del model, compiled, captured
        torch.cuda.empty_cache()


def bench_device_models(args) -> None:
    """The same models on the eagerc device with its memory on the GPU against native CUDA
    eager, one process (the backing is chosen before `import eagerc`: a child process)."""
    if os.environ.get("EAGERC_BACKING") != "cuda":
        env = dict(os.environ, EAGERC_BACKING="cuda")
        subprocess.run([sys.executable, BENCH_GPU, "device-models", "--models", args.models,
                        "--batches", args.batches, "--rounds", str(args.rounds), "--inner", str(args.inner)]
                       + (["--profile"] if args.profile else []), env=env, check=True)
        return
    _log_refusals()
    print(f"{'model':<10} {'batch':>5} {'native ms':>10} {'device ms':>10} {'ratio':>6} "
          f"{'max err':>9} {'compiles':>8} {'aliased':>8}")
    for name, batch, model, inputs in _model_cases(args):  # on cuda
        on_device = copy.deepcopy(model).to("eagerc")
        device_inputs = {k: v.to("eagerc") for k, v in inputs.items()}
        with torch.no_grad():
            native = lambda: model(**inputs)  # noqa: E731
            device = lambda: on_device(**device_inputs)  # noqa: E731
            want = _first_tensor(native())
            eagerc.reset_stats()
            try:
                got = _first_tensor(device())  # compiles what is missing
            except Exception as e:  # noqa: BLE001 - reported, and the next model runs
                falls = {k: dict(v["fallback_reasons"]) for k, v in eagerc.stats()["ops"].items()
                         if v["fallbacks"]}
                print(f"{name:<10} {batch:>5} FAILED {type(e).__name__}: {str(e)[:200]}; fallbacks {falls}",
                      flush=True)
                continue
            err = (got.to("cuda") - want).abs().max().item()
            stats = eagerc.stats()
            aliased = sum(v["aliased"] for v in stats["ops"].values())
            for _ in range(2):
                native(), device()
            nat, dev = [], []
            for _ in range(args.rounds):  # alternating; cuda itself is not overridden
                nat.append(_wall_ms(native, args.inner))
                dev.append(_wall_ms(device, args.inner))
            nat, dev = statistics.median(nat), statistics.median(dev)
        print(f"{name:<10} {batch:>5} {nat:>10.2f} {dev:>10.2f} {dev / nat:>6.2f} {err:>9.1e} "
              f"{stats['compiles']:>8} {aliased:>8}", flush=True)
        if aliased:
            print("   aliased:", sorted(k for k, v in stats["ops"].items() if v["aliased"]))
        on_aliases = sorted(k.split("@")[0] for k, v in stats["ops"].items() if v["on_home_aliases"])
        print(f"   ops on CUDA aliases: {len(on_aliases)} of {len(stats['ops'])} {on_aliases}")
        warm = eagerc.stats()  # after the timed rounds: a warm forward should only hit
        falls = {k: dict(v["fallback_reasons"]) for k, v in warm["ops"].items() if v["fallbacks"]}
        if falls or warm["compiles"] != stats["compiles"]:
            print(f"   warm compiles {warm['compiles'] - stats['compiles']}, fallbacks:",
                  {k: list(v)[:1] for k, v in list(falls.items())[:8]})
        if args.profile:
            with torch.no_grad():  # inference, as timed (with grad the device takes the
                _print_profile({"native": native, "device": device})  # training attention path)
        del model, on_device
        torch.cuda.empty_cache()


# The ops eagerc serves as cuBLAS externs (its hits add eagerc's work to ATen's own).
MATMUL_FAMILY = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def bench_subsets(args) -> None:
    """Override mode serving subsets of the ops a forward reaches, against native, in one
    process (alternating rounds, medians): which ops make a model slower or faster than
    native. Subsets: every op, all but the matmul family, the matmul family only."""
    key = "@" + ("CUDA" if DEV == "cuda" else "CPU")
    print(f"{'model':<10} {'batch':>5} {'served':<26} {'ms':>8} {'ratio':>6}")
    for name, batch, model, inputs in _model_cases(args):
        with torch.no_grad():
            fwd = lambda: model(**inputs)  # noqa: E731
            eagerc.reset_stats()
            with eagerc.enabled(DEV):
                fwd(), fwd()  # compiles what is missing
            served = sorted(k[:-len(key)] for k, v in eagerc.stats()["ops"].items()
                            if k.endswith(key) and v["hits"] + v["misses"])
            subsets = {"every op": None,
                       "all but the matmul family": [o for o in served if o not in MATMUL_FAMILY],
                       "the matmul family only": [o for o in served if o in MATMUL_FAMILY]}
            for ops in subsets.values():
                with eagerc.enabled(DEV, ops=ops):
                    fwd(), fwd()
            times = {label: [] for label in ["native", *subsets]}
            for _ in range(args.rounds):
                for label in times:
                    if label == "native":
                        fwd()
                        times[label].append(_wall_ms(fwd, args.inner))
                        continue
                    with eagerc.enabled(DEV, ops=subsets[label]):
                        fwd()  # the first call after registering pays cold dispatch tables
                        times[label].append(_wall_ms(fwd, args.inner))
        native = statistics.median(times["native"])
        print(f"   serves {len(served)} ops: {served}")
        for label, samples in times.items():
            ms = statistics.median(samples)
            print(f"{name:<10} {batch:>5} {label:<26} {ms:>8.3f} {ms / native:>6.3f}", flush=True)
        del model
        if DEV == "cuda":
            torch.cuda.empty_cache()


def _log_refusals() -> None:
    """Print eagerc's "not compiled" log lines (first line each): why a call fell back."""
    import logging

    class FirstLine(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if "not compiled" in text or "Inductor failed" in text:
                print("   LOG", text.splitlines()[0][:400], flush=True)

    logging.getLogger("eagerc").addHandler(FirstLine())
    logging.getLogger("eagerc").setLevel(logging.INFO)


def _print_profile(sides: dict, forwards: int = 5, top: int = 12) -> None:
    """torch.profiler's self CPU time per op, and GPU time per kernel, for `forwards` warm
    forwards of each side: where the host time of a launch-bound model goes, and which
    kernels make a GPU-bound one slower."""
    from torch.profiler import ProfilerActivity, profile

    for side, fn in sides.items():
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(forwards):
                fn()
            torch.cuda.synchronize()
        averages = prof.key_averages()
        for what, key in (("self CPU time", "self_cpu_time_total"), ("GPU time", "self_device_time_total")):
            print(f"   == {side}: {what}, {forwards} forwards")
            table = averages.table(sort_by=key, row_limit=top, max_name_column_width=70)
            print("\n".join("   " + line for line in table.splitlines()))
