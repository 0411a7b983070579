"""Per-model report for the eagerc device: ops reached, kernels compiled, cold and warm
forward time against CPU eager.

    python tools/device_model_report.py [--rounds 2] [--runs 20] [--profile] [--models bert,gpt2]

For each model (transformers, small configs, random init: no weights are downloaded) a
fresh subprocess is started with a fresh temporary EAGERC_CACHE_DIR in its environment, so
eagerc is imported with an empty kernel cache in a clean process. The child measures:

- cold: wall time of the first forward on "eagerc" (every kernel traced and compiled)
- ops: distinct ops reached (per-op stats with hits + misses > 0) in that first forward
- compiles: kernels compiled in that first forward (stats()["compiles"])
- warm: median of --runs forwards on "eagerc" (every kernel loaded)
- cpu: median of --runs CPU eager forwards, same process, same torch.get_num_threads()

--rounds N repeats the whole measurement N times (each round a fresh process and cache)
and prints one row per round, because timings on a shared machine are noisy.
--profile prints, per model (first round), torch.profiler's per-op self CPU time per warm
forward on eagerc and on CPU side by side (averaged over --runs forwards).
The child's TORCHINDUCTOR_CACHE_DIR is fresh too (a really cold run) unless
--keep-inductor-cache.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = ["bert", "gpt2", "resnet", "vit", "llama"]


def build(name):
    import torch
    import transformers

    torch.manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=100,
                                      max_position_embeddings=64)
        return transformers.BertModel(cfg), {"input_ids": torch.randint(0, 100, (2, 16))}
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100,
                                      n_positions=64, use_cache=False)
        return transformers.GPT2LMHeadModel(cfg), {"input_ids": torch.randint(0, 100, (2, 16))}
    if name == "resnet":
        cfg = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])
        return transformers.ResNetModel(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}
    if name == "vit":
        cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, image_size=32, patch_size=8)
        return transformers.ViTModel(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}
    if name == "llama":  # a Llama-style decoder: RMSNorm, rotary embeddings, SiLU-gated MLP, GQA
        cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, intermediate_size=64, vocab_size=100,
                                       max_position_embeddings=64, use_cache=False)
        return transformers.LlamaForCausalLM(cfg), {"input_ids": torch.randint(0, 100, (2, 16))}
    raise ValueError(name)


def _median_time(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _profile(fn, runs):
    """Per-op self CPU time (us per forward) and calls per forward over `runs` forwards."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(runs):
            fn()
    return {e.key: (e.self_cpu_time_total / runs, e.count / runs) for e in prof.key_averages()}


def profile_table(dev, cpu, top):
    """Markdown: the ops with the largest self time on either side, side by side."""
    keys = sorted(set(dev) | set(cpu), key=lambda k: -max(dev.get(k, (0, 0))[0],
                                                          cpu.get(k, (0, 0))[0]))
    rows = ["| op | eagerc self us | eagerc calls | CPU self us | CPU calls |",
            "|---|---|---|---|---|"]
    for k in keys[:top]:
        d, c = dev.get(k, (0.0, 0)), cpu.get(k, (0.0, 0))
        rows.append(f"| {k} | {d[0]:.1f} | {d[1]:g} | {c[0]:.1f} | {c[1]:g} |")
    rows.append(f"| **total self time** | {sum(v[0] for v in dev.values()):.1f} | "
                f"{sum(v[1] for v in dev.values()):g} | {sum(v[0] for v in cpu.values()):.1f} | "
                f"{sum(v[1] for v in cpu.values()):g} |")
    return "\n".join(rows)


def child(name, runs, do_profile, top):
    """Runs in a fresh process whose EAGERC_CACHE_DIR is an empty directory."""
    import torch

    import eagerc
    from eagerc.testing import assert_close

    model, inputs = build(name)
    model.eval()
    dev_model = copy.deepcopy(model).to("eagerc")  # the CPU model stays for the baseline
    dev_inputs = {k: v.to("eagerc") for k, v in inputs.items()}

    eagerc.reset_stats()
    with torch.no_grad():
        t0 = time.perf_counter()
        out = dev_model(**dev_inputs)
        cold = time.perf_counter() - t0
    st = eagerc.stats()
    ops = sorted(k for k, v in st["ops"].items() if v["hits"] + v["misses"] > 0)

    with torch.no_grad():
        expected = model(**inputs)
        assert_close(out[0].cpu(), expected[0], model=True)

        def dev_fwd():
            return dev_model(**dev_inputs)

        def cpu_fwd():
            return model(**inputs)

        for _ in range(3):  # warm-up, both sides
            dev_fwd(), cpu_fwd()
        warm = _median_time(dev_fwd, runs)
        cpu = _median_time(cpu_fwd, runs)
        profiles = {}
        if do_profile:
            profiles = {"eagerc": _profile(dev_fwd, runs), "cpu": _profile(cpu_fwd, runs)}

    return {
        "model": name, "ops": len(ops), "op_names": ops, "compiles": st["compiles"],
        "disk_loads": st["disk_loads"], "fallbacks": st["fallbacks"],
        "compile_seconds": st["compile_seconds"], "cold_s": cold, "warm_s": warm, "cpu_s": cpu,
        "threads": torch.get_num_threads(), "torch": torch.__version__, "profiles": profiles,
    }


def run_child(name, runs, do_profile, top, keep_inductor_cache=False):
    with tempfile.TemporaryDirectory(prefix="eagerc-report-cache-") as cache:
        env = dict(os.environ, EAGERC_CACHE_DIR=cache)  # set before eagerc is imported
        if not keep_inductor_cache:  # Inductor's own caches (FX graph, C++ builds) empty too
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--runs", str(runs),
               "--top", str(top)] + (["--profile"] if do_profile else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            raise SystemExit(f"{name}: child failed with exit status {proc.returncode}")
        line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
        return json.loads(line[len("RESULT "):])


def fmt_ms(seconds):
    return f"{seconds * 1e3:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--keep-inductor-cache", action="store_true",
                    help="cold runs reuse Inductor's own cache (TORCHINDUCTOR_CACHE_DIR)")
    ap.add_argument("--json", help="also write all results to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        result = child(args.child, args.runs, args.profile, args.top)
        print("RESULT " + json.dumps(result))
        return

    results = []
    for rnd in range(args.rounds):
        for name in args.models.split(","):
            r = run_child(name, args.runs, args.profile and rnd == 0, args.top,
                          args.keep_inductor_cache)
            r["round"] = rnd + 1
            results.append(r)
            print(f"# done {name} round {rnd + 1}: cold {r['cold_s']:.1f} s", file=sys.stderr,
                  flush=True)

    r0 = results[0]
    print(f"torch {r0['torch']}, {os.cpu_count()} cores, torch.get_num_threads() = "
          f"{r0['threads']}, warm/cpu = median of {args.runs} forwards\n")
    print("| model | round | ops reached | kernels compiled | fallbacks | cold (s) "
          "| warm (ms) | CPU eager (ms) | warm / CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['round']} | {r['ops']} | {r['compiles']} | {r['fallbacks']} "
              f"| {r['cold_s']:.1f} | {fmt_ms(r['warm_s'])} | {fmt_ms(r['cpu_s'])} "
              f"| {r['warm_s'] / r['cpu_s']:.2f}x |")
    for r in results:
        if r["profiles"]:
            print(f"\n#### {r['model']}: torch.profiler self CPU time per warm forward "
                  f"(mean of {args.runs} forwards, round {r['round']})\n")
            print(profile_table(r["profiles"]["eagerc"], r["profiles"]["cpu"], args.top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
