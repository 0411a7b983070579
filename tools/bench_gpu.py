"""eagerc on CUDA against native CUDA eager, same process (run on the GPU machine).

    python tools/bench_gpu.py large            # 8192x8192 fp32: kernel time per op, bandwidth
    python tools/bench_gpu.py cold [--ab prelude|lean|plan --rounds N]  # cold compile per op
                                               # (fresh caches), new sizes
    python tools/bench_gpu.py cold-model [--models ...] [--ab prelude|lean|plan|compile|background|native --rounds N]
                                               # a model's first forward with fresh caches
                                               # (--ab compile: against torch.compile's)
    python tools/bench_gpu.py models [--models bert,gpt2,resnet50] [--batches 1,32]
    python tools/bench_gpu.py device-models [--models ...] [--batches ...]
                                               # the eagerc device on GPU memory
                                               # (EAGERC_BACKING=cuda) vs native CUDA

Hit host time on small tensors: ``python tools/bench_hit.py --device cuda``.
Every number is a median over alternating rounds (native, then eagerc, ...), so drifts of
clock or load hit both sides alike. TF32 is off for matmuls and convolutions.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import eagerc

# The model benchmarks, the device (EAGERC_BENCH_DEVICE; "cpu": a dry run of the script off the
# GPU machine) and the alternating-rounds helper live in bench_gpu_models.py.
from bench_gpu_models import (DEV, _alternate, _first_tensor, bench_device_models, bench_models,
                              bench_subsets, build_model)


def _events_ms(fn, inner: int) -> float:
    """Device time of one call of `fn` (CUDA events around `inner` calls)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / inner


# ------------------------------------------------------------------ large tensors

def large_cases(n: int):
    x, y = torch.randn(n, n, device=DEV), torch.randn(n, n, device=DEV)
    w = torch.randn(n, device=DEV)
    # A transformer's linear layer (cuBLASLt with a bias epilogue, eagerc's and native's).
    xl, wl, bl = torch.randn(4096, 768, device=DEV), torch.randn(3072, 768, device=DEV), torch.randn(3072, device=DEV)
    t = n * n * 4  # bytes of one tensor
    row = n * 4
    # name -> (fn, bytes moved by an ideal kernel, memory-bound)
    return {
        "abs": (lambda: torch.abs(x), 2 * t, True),
        "neg": (lambda: torch.neg(x), 2 * t, True),
        "relu": (lambda: torch.relu(x), 2 * t, True),
        "sigmoid": (lambda: torch.sigmoid(x), 2 * t, True),
        "tanh": (lambda: torch.tanh(x), 2 * t, True),
        "exp": (lambda: torch.exp(x), 2 * t, True),
        "gelu": (lambda: F.gelu(x), 2 * t, True),
        "add": (lambda: x + y, 3 * t, True),
        "add(alpha=2)": (lambda: torch.add(x, y, alpha=2), 3 * t, True),
        "mul": (lambda: x * y, 3 * t, True),
        "div": (lambda: x / y, 3 * t, True),
        "where": (lambda: torch.where(x > 0, x, y), 3 * t, True),
        "clamp": (lambda: torch.clamp(x, -0.5, 0.5), 2 * t, True),
        "pow(2)": (lambda: x.pow(2), 2 * t, True),
        "add_(inplace)": (lambda: y.add_(x, alpha=1e-9), 3 * t, True),
        "add row bias": (lambda: x + w, 2 * t + row, True),
        "sum(dim=1)": (lambda: x.sum(dim=1), t + row, True),
        "sum(dim=0)": (lambda: x.sum(dim=0), t + row, True),
        "mean(dim=1)": (lambda: x.mean(dim=1), t + row, True),
        "amax(dim=1)": (lambda: x.amax(dim=1), t + row, True),
        "softmax": (lambda: torch.softmax(x, dim=-1), 2 * t, True),
        "log_softmax": (lambda: F.log_softmax(x, dim=-1), 2 * t, True),
        "layer_norm": (lambda: F.layer_norm(x, (n,)), 2 * t, True),
        "mm (cuBLAS extern)": (lambda: x @ y, 3 * t, False),
        "linear 4096x768 (row bias)": (lambda: F.linear(xl, wl, bl), 4 * (4096 * 768 + 3072 * 768 + 4096 * 3072), False),
    }


def bench_large(args) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    n = args.size
    cases = large_cases(n)
    src, dst = torch.randn(n, n, device=DEV), torch.empty(n, n, device=DEV)
    copy_ms = statistics.median(_events_ms(lambda: dst.copy_(src), 10) for _ in range(10))
    copy_gbs = 2 * n * n * 4 / copy_ms / 1e6
    print(f"{n}x{n} float32 on {torch.cuda.get_device_name(0)}; device-to-device copy "
          f"{copy_gbs:.0f} GB/s; kernel time per call (CUDA events), median of {args.rounds} "
          "alternating rounds")
    print(f"{'op':<20} {'native ms':>10} {'eagerc ms':>10} {'ratio':>6} {'eagerc GB/s':>12} {'% copy':>7}")
    with eagerc.enabled(DEV):
        for fn, _, _ in cases.values():
            fn()  # compile every kernel first
    torch.cuda.synchronize()
    compiles = eagerc.stats()["compiles"]
    ratios, fractions = [], []
    for name, (fn, nbytes, memory_bound) in cases.items():
        native, compiled = _alternate(fn, fn, args.rounds, lambda f: _events_ms(f, args.inner))
        ratios.append(compiled / native)
        gbs = nbytes / compiled / 1e6
        frac = gbs / copy_gbs if memory_bound else float("nan")
        if memory_bound:
            fractions.append(frac)
        print(f"{name:<20} {native:>10.3f} {compiled:>10.3f} {compiled / native:>6.2f} "
              f"{gbs:>12.0f} {frac * 100:>6.0f}%")
    assert eagerc.stats()["compiles"] == compiles, "a timed call compiled"
    geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
    print(f"geomean eagerc/native over {len(ratios)} ops: {geo:.3f}; memory-bound ops at "
          f">= 85% of copy bandwidth: {sum(f >= 0.85 for f in fractions)}/{len(fractions)} "
          f"(median {statistics.median(fractions) * 100:.0f}%)")


# ------------------------------------------------------------------ cold compiles

COLD_OPS = {
    "abs": lambda x, y: torch.abs(x),
    "add(alpha=2)": lambda x, y: torch.add(x, y, alpha=2),
    "sum(dim=1)": lambda x, y: x.sum(dim=1),
    "softmax": lambda x, y: torch.softmax(x, dim=-1),
    "mul": lambda x, y: x * y,
    "gelu": lambda x, y: F.gelu(x),
    "layer_norm": lambda x, y: F.layer_norm(x, (x.shape[-1],)),
    "amax(dim=0)": lambda x, y: x.amax(dim=0),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "mm": lambda x, y: x @ y,
    "tanh": lambda x, y: torch.tanh(x),
    "cumsum": lambda x, y: torch.cumsum(x, 1),
}


def bench_cold(args) -> None:
    if os.environ.get("_EAGERC_COLD_CHILD") != "1":
        _cold_processes(args)
        return
    from eagerc.codegen.cpp import glue_prelude, wrapper_build
    from eagerc.codegen.triton import plan_build

    glue = []  # seconds of each wrapper build (the g++ step of a GPU compile)
    build_glue = wrapper_build.build_glue

    def timed_glue(builder, *how, **kw):
        t0 = time.perf_counter()
        try:
            return build_glue(builder, *how, **kw)
        finally:
            glue.append(time.perf_counter() - t0)

    wrapper_build.build_glue = timed_glue
    x, y = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
    t0 = time.perf_counter()
    with eagerc.enabled(DEV, ops=["aten::neg"]):
        torch.neg(x)  # the first compile of a process pays one-time costs (imports, headers)
    print(f"first compile of the process (neg, with one-time Inductor/Triton/header costs): "
          f"{time.perf_counter() - t0:.2f} s", flush=True)
    if os.environ.get("_EAGERC_COLD_WARMUP") == "1":
        return
    seconds = {}
    for name, fn in COLD_OPS.items():
        before, builds = eagerc.stats(), len(glue)
        t0 = time.perf_counter()
        with eagerc.enabled(DEV):
            fn(x, y)
        if DEV == "cuda":
            torch.cuda.synchronize()
        after = eagerc.stats()
        seconds[name] = (time.perf_counter() - t0, after["compiles"] - before["compiles"],
                         sum(glue[builds:]))
    print("RESULT " + json.dumps(seconds), flush=True)
    print(f"wrappers from a launch plan: {plan_build.counts['plan']}; built on eagerc's lean GPU header: "
          f"{glue_prelude.counts['lean']}, on its full header: {glue_prelude.counts['slim']}, fell back to "
          f"Inductor's: {glue_prelude.counts['fallback']}; why no plan: {dict(plan_build.reasons)}", flush=True)
    if os.environ.get("_EAGERC_COLD_SIZES") == "1":
        before = eagerc.stats()["compiles"]
        with eagerc.enabled(DEV):
            for n in (3, 17, 100, 257, 1000):
                a, b = torch.randn(n, n, device=DEV), torch.randn(n, n, device=DEV)
                for fn in COLD_OPS.values():
                    fn(a, b)
        print(f"new sizes (5 sizes x {len(COLD_OPS)} ops): {eagerc.stats()['compiles'] - before} compiles")


# What `--ab` compares: (variable, value in A processes, value in B processes, B's label).
AB_SWITCHES = {"prelude": ("EAGERC_GLUE_PRELUDE", "1", "0", "Inductor's header"),
               "lean": ("EAGERC_GLUE_PRELUDE", "1", "full", "full prelude"),
               "plan": ("EAGERC_GPU_LAUNCHER", "1", "0", "wrappers by g++"),
               "compile": ("_EAGERC_COLD_SIDE", "eagerc", "compile", "torch.compile"),
               # Native CUDA eager's first forward in a fresh process (the zero-wait target).
               "native": ("_EAGERC_COLD_SIDE", "eagerc", "native", "native eager"),
               # A miss served at once by the native kernel while its own compiles in the
               # compile service (EAGERC_COMPILE=background); the row adds when every
               # compile ended.
               "background": ("EAGERC_COMPILE", "now", "background", "background compiles"),
               # Inductor's Triton compiles in this process, not in its pool of workers.
               "threads": ("TORCHINDUCTOR_COMPILE_THREADS", "", "1", "one compile thread")}


def _fresh_caches(directory: str) -> dict:
    """The environment of a cold child process: empty eagerc, Inductor and Triton caches
    under `directory`; misses compile before they answer (EAGERC_COMPILE=now: what a cold
    compile costs) unless the caller set the mode (`--ab background` compares both)."""
    return {"EAGERC_COMPILE": "now", **os.environ, "_EAGERC_COLD_CHILD": "1",
            "EAGERC_CACHE_DIR": f"{directory}/eagerc", "TORCHINDUCTOR_CACHE_DIR": f"{directory}/inductor",
            "TRITON_CACHE_DIR": f"{directory}/triton"}


def _cold_processes(args) -> None:
    """Fresh processes with empty eagerc and Inductor caches: nothing is warm but what a
    machine keeps (precompiled headers, the ISA probe's memo, bytecode; Triton's cache is fresh
    too). With --ab SWITCH:
    first a warm-up process (the machine's first builds its headers), then processes with
    SWITCH's A and B values (AB_SWITCHES), alternating, `--rounds` of each; per op the median
    first-call and wrapper-build seconds of each."""
    if args.ab == "compile":
        raise SystemExit("--ab compile compares a model's first forward: use it with cold-model")
    variable, on, off, off_label = AB_SWITCHES.get(args.ab or "", ("", "", "", ""))
    modes = [on, off] * max(1, min(args.rounds, 3)) if args.ab else [on]
    runs = [("warm-up", on)] if args.ab else []
    runs += [("eagerc" if m == on else off_label, m) for m in modes]
    results = {}
    for i, (label, value) in enumerate(runs):
        print(f"== process {i}: {label}", flush=True)
        with tempfile.TemporaryDirectory() as fresh:
            env = dict(_fresh_caches(fresh),
                       _EAGERC_COLD_WARMUP="1" if label == "warm-up" else "0",
                       _EAGERC_COLD_SIZES="1" if i == len(runs) - 1 else "0")
            if variable and value:
                env[variable] = value
            done = subprocess.run([sys.executable, __file__, "cold"], env=env, check=True,
                                  capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                results.setdefault(label, []).append(json.loads(line[len("RESULT "):]))
            elif "Online softmax" not in line and line.strip() and "split the reduction" not in line \
                    and "important use case" not in line and line != "softmax.":
                print("   " + line)
    labels = [label for label in ("eagerc", off_label) if label in results]
    print(f"{'op':<14} {'kernels':>7} " + " ".join(f"{label[:16] + ' s':>18} {'g++ s':>6}" for label in labels))
    per_kernel = {label: [] for label in labels}
    for op in COLD_OPS:
        cells = []
        for label in labels:
            runs_of = [r[op] for r in results[label]]
            first = statistics.median(r[0] for r in runs_of)
            glue = statistics.median(r[2] for r in runs_of)
            kernels = runs_of[0][1]
            if kernels:
                per_kernel[label].append(first / kernels)
            cells.append(f"{first:>18.2f} {glue:>6.2f}")
        print(f"{op:<14} {kernels:>7} " + " ".join(cells))
    for label in labels:
        print(f"median per kernel, {label}: {statistics.median(per_kernel[label]):.2f} s over "
              f"{len(per_kernel[label])} ops ({len(results[label])} processes)")


def _cold_native_child(args) -> None:
    """Native eager's first forward of the model, in a fresh process as eagerc's: the same
    warm-up op (the CUDA context), then the first forward, timed; its own output is the
    reference (error 0)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.neg(torch.randn(8, device=DEV))
    torch.manual_seed(0)
    model, inputs = build_model(args.models, 1)
    with torch.no_grad():
        t0 = time.perf_counter()
        _first_tensor(model(**inputs))
        if DEV == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    print("RESULT " + json.dumps({"seconds": seconds, "compiles": 0, "err": 0.0, "plan": 0, "lean": 0,
                                  "slim": 0, "fallback": 0, "reasons": {}}), flush=True)


def _cold_compile_child(args) -> None:
    """torch.compile's first forward of the model, in a fresh process as eagerc's: first a
    warm-up compile of a small function (Inductor's and Triton's one-time costs, as eagerc's
    child pays with its warm-up op), then the model's first compiled forward, timed."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x = torch.randn(8, device=DEV)
    torch.compile(lambda t: torch.neg(t) + 1)(x)
    torch.manual_seed(0)
    model, inputs = build_model(args.models, 1)
    with torch.no_grad():
        want = _first_tensor(model(**inputs))
        compiled = torch.compile(model)
        t0 = time.perf_counter()
        got = _first_tensor(compiled(**inputs))
        if DEV == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    err = ((got - want).abs().max() / want.abs().max()).item()
    print("RESULT " + json.dumps({"seconds": seconds, "compiles": 0, "err": err, "plan": 0, "lean": 0,
                                  "slim": 0, "fallback": 0, "reasons": {}}), flush=True)


def _print_profile_stats(profile) -> None:
    import io
    import pstats

    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(order).print_stats(35)
        print("\n".join("PROF " + line for line in text.getvalue().splitlines() if line.strip()), flush=True)


def _profiled(fn):
    """Run `fn` under cProfile when _EAGERC_COLD_PROFILE=1 and print where its time went
    (cumulative and own time, lines prefixed PROF for the parent to pass on). With
    background compiles the profile is the caller's (its compiles run in the compile
    service's processes), and the run waits for them before returning."""
    if os.environ.get("_EAGERC_COLD_PROFILE") != "1":
        return fn()
    import cProfile

    profile = cProfile.Profile()
    try:
        out = profile.runcall(fn)
        eagerc.wait_compiles()
        return out
    finally:
        _print_profile_stats(profile)


def bench_cold_model(args) -> None:
    """A model's first forward in override mode (batch 1, TF32 off) in fresh processes with
    empty eagerc, Inductor and Triton caches, after one warm-up compile (the process's one-time
    costs): seconds, compiles, and which header the wrappers built on (glue_prelude). With
    --ab SWITCH, processes with SWITCH's A and B values alternate (`--rounds` of each, at
    most 2); `--ab compile` alternates with torch.compile's first forward (_cold_compile_child).
    `--profile` adds one eagerc process under cProfile (not timed against the others)."""
    if os.environ.get("_EAGERC_COLD_CHILD") == "1" and os.environ.get("_EAGERC_COLD_SIDE") == "compile":
        _cold_compile_child(args)
        return
    if os.environ.get("_EAGERC_COLD_CHILD") == "1" and os.environ.get("_EAGERC_COLD_SIDE") == "native":
        _cold_native_child(args)
        return
    if os.environ.get("_EAGERC_COLD_CHILD") == "1":
        from eagerc.codegen.cpp import glue_prelude
        from eagerc.codegen.triton import plan_build

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if os.environ.get("_EAGERC_COLD_VERBOSE") == "1":  # gpu_check.sh cold-child: progress
            import logging
            import threading

            logging.basicConfig(format="%(asctime)s %(message)s")
            logging.getLogger("eagerc").setLevel(logging.DEBUG)

            def progress():
                while True:
                    time.sleep(5)
                    st = eagerc.stats()
                    print(f"progress {time.strftime('%X')}: compiles {st['compiles']} hits {st['hits']} "
                          f"misses {st['misses']} fallbacks {st['fallbacks']} plans {plan_build.counts}",
                          file=sys.stderr, flush=True)

            threading.Thread(target=progress, daemon=True).start()
        x = torch.randn(8, device=DEV)
        with eagerc.enabled(DEV, ops=["aten::neg"]):
            torch.neg(x)
        torch.manual_seed(0)
        model, inputs = build_model(args.models, 1)
        with torch.no_grad():
            # Native's reference forward runs after eagerc's: before it, it would create the
            # cuBLAS and cuDNN handles eagerc's first forward pays for as native's does.
            before = eagerc.stats()["compiles"]

            def first_forward():
                with eagerc.enabled(DEV):
                    out = _first_tensor(model(**inputs))
                if DEV == "cuda":
                    torch.cuda.synchronize()
                return out

            t0 = time.perf_counter()
            got = _profiled(first_forward)
            seconds = time.perf_counter() - t0
            eagerc.wait_compiles()  # background compiles: until the last kernel is in the cache
            compiled = time.perf_counter() - t0
            want = _first_tensor(model(**inputs))
        err = ((got - want).abs().max() / want.abs().max()).item()
        print("RESULT " + json.dumps({"seconds": seconds, "all_compiled_s": compiled,
                                      "compiles": eagerc.stats()["compiles"] - before,
                                      "err": err, **glue_prelude.counts, **plan_build.counts,
                                      "reasons": dict(plan_build.reasons)}), flush=True)
        return
    # (environment, label, profiled) per process: eagerc's default, then each switch's other
    # value (--ab takes several, comma-separated), `--rounds` times (at most 2); --profile
    # adds a cProfiled process (and, with the background switch, one of background compiles).
    round_ = [({}, "eagerc's default", False)]
    for name in args.switches:
        variable, _, off, label = AB_SWITCHES[name]
        round_.append(({variable: off}, label, False))
    modes = round_ * (max(1, min(args.rounds, 2)) if args.switches else 1)
    if args.profile:
        modes.append(({}, "eagerc, profiled", True))
        if "background" in args.switches:
            modes.append(({"EAGERC_COMPILE": "background"}, "background, profiled", True))
    print(f"{'model':<10} {'wrappers on':>17} {'first forward s':>16} {'compiled s':>10} {'compiles':>8} "
          f"{'plan':>5} {'lean':>5} {'full':>5} {'fallback':>8} {'rel err':>9}")
    for name in args.models.split(","):
        for overrides, label, profiled in modes:
            with tempfile.TemporaryDirectory() as fresh:
                env = {**_fresh_caches(fresh), **overrides}
                if profiled:
                    env["_EAGERC_COLD_PROFILE"] = "1"
                done = subprocess.run([sys.executable, __file__, "cold-model", "--models", name],
                                      env=env, capture_output=True, text=True)
            results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines()
                       if line.startswith("RESULT ")]
            if not results:
                print(f"{name:<10} FAILED: {(done.stderr or done.stdout)[-600:]}", flush=True)
                continue
            if profiled:
                print("\n".join("   " + line[5:] for line in done.stdout.splitlines() if line.startswith("PROF ")))
            r = results[0]
            print(f"{name:<10} {label:>17} {r['seconds']:>16.1f} {r.get('all_compiled_s', r['seconds']):>10.1f} "
                  f"{r['compiles']:>8} {r['plan']:>5} {r['lean']:>5} "
                  f"{r['slim']:>5} {r['fallback']:>8} {r['err']:>9.1e}  no plan: {r['reasons']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["large", "cold", "cold-model", "models", "device-models", "subsets"])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--profile", action="store_true",
                        help="device-models: native vs device; models: torch.compile vs capture "
                             "(with --eager-only: override vs native); cold-model: one cProfiled process")
    parser.add_argument("--eager-only", action="store_true",
                        help="models: native and override mode only (no torch.compile, no capture)")
    parser.add_argument("--ab", help="cold, cold-model: alternate processes with this build switch's two "
                        f"values (one of {', '.join(sorted(AB_SWITCHES))}; cold-model takes several, "
                        "comma-separated: each switch's other value against eagerc's default)")
    args = parser.parse_args()
    args.switches = names = [n for n in (args.ab or "").split(",") if n]
    if any(n not in AB_SWITCHES for n in names) or (args.what != "cold-model" and len(names) > 1):
        parser.error(f"--ab: {args.ab!r} is not a switch of {args.what} ({', '.join(sorted(AB_SWITCHES))})")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0) if DEV == 'cuda' else DEV}")
    {"large": bench_large, "cold": bench_cold, "cold-model": bench_cold_model, "models": bench_models,
     "device-models": bench_device_models, "subsets": bench_subsets}[args.what](args)


if __name__ == "__main__":
    main()
