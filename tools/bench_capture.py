"""Benchmark eagerc.capture against eager and torch.compile on small transformers models.

    python tools/bench_capture.py                 # all models, markdown tables on stdout
    python tools/bench_capture.py --models bert --iters 200

For each model (random init, eval, no_grad): steady-state time per call of eager,
torch.compile (Inductor, default options) and eagerc.capture (eagerc's compile layer); the
first call of each (capture: with an empty kernel cache, then cached); the guard and the
mock bookkeeping per call (the mock timed with its compiled graph replaced by a stub, so only
capture's own Python work counts); graph counts and graph breaks from torch._dynamo.explain.
"""
import argparse
import os
import statistics
import tempfile
import time

import torch

from eagerc.capture import capture, capture_stats


def make_model(name, batch=2, seq=16):
    import transformers as T

    torch.manual_seed(0)
    if name == "bert":
        cfg = T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64,
                           max_position_embeddings=64)
        return T.BertModel(cfg).eval(), (torch.randint(0, 100, (batch, seq)),)
    if name == "gpt2":
        cfg = T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                           bos_token_id=0, eos_token_id=0)
        return T.GPT2Model(cfg).eval(), (torch.randint(0, 100, (batch, seq)),)
    if name == "resnet":
        cfg = T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                             layer_type="basic")
        return T.ResNetModel(cfg).eval(), (torch.randn(batch, 3, 32, 32),)
    if name == "vit":
        cfg = T.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, image_size=32, patch_size=8)
        return T.ViTModel(cfg).eval(), (torch.randn(batch, 3, 32, 32),)
    raise ValueError(f"unknown model {name!r}: bert, gpt2, resnet, vit")


def per_call_us(fn, iters, repeat=11):
    """Median over `repeat` rounds of the mean time of `iters` calls, in microseconds."""
    for _ in range(10):
        fn()
    rounds = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        rounds.append((time.perf_counter() - t) / iters * 1e6)
    return statistics.median(rounds)


def first_call_s(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench(name, iters):
    model, inputs = make_model(name)
    row = {"model": name}
    with torch.no_grad():
        row["eager"] = per_call_us(lambda: model(*inputs), iters)
        torch._dynamo.reset()
        explain = torch._dynamo.explain(model)(*inputs)
        row["dynamo_graphs"] = explain.graph_count
        row["dynamo_breaks"] = explain.graph_break_count
        torch._dynamo.reset()
        compiled = torch.compile(model)
        row["compile_first"] = first_call_s(lambda: compiled(*inputs))
        row["torch.compile"] = per_call_us(lambda: compiled(*inputs), iters)
        # First call of capture: monitor run + compile into kernel_cache; then a new
        # capture of the same model finds the graph there (as a later process would).
        row["capture_first"] = first_call_s(lambda: capture(model)(*inputs))
        captured = capture(model)
        row["capture_first_cached"] = first_call_s(lambda: captured(*inputs))
        row["capture"] = per_call_us(lambda: captured(*inputs), iters)
        stats = capture_stats(captured)
        row["records"], row["graphs"] = stats["records"], stats["graphs"]
        row["stops"] = stats["stop_reasons"] or "-"
        record = captured.cache.records[0]
        if record.eager:
            raise SystemExit(f"{name}: capture stopped: {record.stop_reason}")
        args, kwargs = inputs, {}
        row["guard"] = per_call_us(lambda: record.guard(args, kwargs), iters * 10)
        slots = record.guard(args, kwargs)
        env = record.mock.__globals__
        real_run = env.get("_run")
        if real_run is not None:
            outs = _outputs_of(record, slots)
            env["_run"] = lambda *a: outs
        row["mock"] = per_call_us(lambda: record.mock(slots), iters * 10)
        if real_run is not None:
            env["_run"] = real_run
        ref = model(*inputs)
        got = captured(*inputs)
        torch.testing.assert_close(got[0], ref[0])
    return row


def _outputs_of(record, slots):
    """The compiled graph's outputs for `slots`, computed once (for the stubbed mock)."""
    captured_outs = []
    env = record.mock.__globals__
    real = env["_run"]

    def spy(*a):
        out = real(*a)
        captured_outs.append(out)
        return out
    env["_run"] = spy
    record.mock(slots)
    env["_run"] = real
    return captured_outs[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bert", "gpt2", "resnet", "vit"])
    parser.add_argument("--iters", type=int, default=100)
    opts = parser.parse_args()
    # A kernel cache of its own: the first capture call really compiles.
    os.environ["EAGERC_CACHE_DIR"] = tempfile.mkdtemp(prefix="eagerc-bench-capture-")
    rows = [bench(m, opts.iters) for m in opts.models]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of 11 rounds\n")
    print("| model | eager µs | torch.compile µs | capture µs | capture/compile | "
          "guard µs | mock µs | records | graphs | dynamo graphs | dynamo breaks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['eager']:.0f} | {r['torch.compile']:.0f} | "
              f"{r['capture']:.0f} | {r['capture'] / r['torch.compile']:.2f} | "
              f"{r['guard']:.1f} | {r['mock']:.1f} | {r['records']} | {r['graphs']} | "
              f"{r['dynamo_graphs']} | {r['dynamo_breaks']} |")
    print("\nFirst call, seconds: torch.compile (Inductor's own caches as found); capture with "
          "an empty kernel cache (monitor run + compile); capture finding its graph in "
          "kernel_cache (monitor run + load)\n")
    print("| model | torch.compile s | capture s | capture, cached s |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['compile_first']:.2f} | {r['capture_first']:.2f} | "
              f"{r['capture_first_cached']:.2f} |")


if __name__ == "__main__":
    main()
