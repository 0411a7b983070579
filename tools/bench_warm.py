"""warm_cache: 2 workers vs 1 on a model needing 30+ kernels, and the time from
`import eagerc` to a model's first output on a warmed cache, against CPU eager and
torch.compile's first call (each in a fresh process, fresh eagerc and Inductor caches).

    python tools/bench_warm.py [--workers 1 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

def bert_source(hidden: int = 64, heads: int = 4, vocab: int = 200, seq: int = 32,
                pad_from: int = 20) -> str:
    """The source of `bert()`: a tiny transformers BERT and its inputs (one padded row),
    run in a child process by this script and by tools/bench_farm.py."""
    return f"""
import torch, transformers
def bert():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size={hidden}, num_hidden_layers=2, num_attention_heads={heads},
                                  intermediate_size={2 * hidden}, vocab_size={vocab},
                                  max_position_embeddings={2 * seq})
    ids = torch.randint(0, {vocab}, (2, {seq})); mask = torch.ones(2, {seq}, dtype=torch.long)
    mask[1, {pad_from}:] = 0
    return transformers.BertModel(cfg).eval(), (ids, mask)
"""


MODEL = bert_source()

WARM = MODEL + r"""
import json, sys, time, eagerc
model, (ids, mask) = bert()
model = model.to("eagerc")
t = time.perf_counter()
r = eagerc.warm_cache(model, ids.to("eagerc"), mask.to("eagerc"), workers=int(sys.argv[1]),
                      confirm=True)  # transformers branches on tracing: one real forward
print(json.dumps({"seconds": time.perf_counter() - t, "compiled": r.compiled, "calls": r.calls,
                  "confirm": r.compiled_on_confirm,
                  "failed": len(r.failed)}))
"""

FIRST_OUTPUT = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
mode = sys.argv[1]
if mode == "eagerc":
    import eagerc
exec(MODEL_SRC)
model, (ids, mask) = bert()
t1 = time.perf_counter()
with torch.no_grad():
    if mode == "eagerc":
        model = model.to("eagerc"); out = model(ids.to("eagerc"), mask.to("eagerc")).last_hidden_state.cpu()
    elif mode == "compile":
        out = torch.compile(model)(ids, mask).last_hidden_state
    else:
        out = model(ids, mask).last_hidden_state
t2 = time.perf_counter()
extra = {"compiles": __import__("eagerc").stats()["compiles"]} if mode == "eagerc" else {}
print(json.dumps({"import_s": t1 - t0, "first_output_s": t2 - t1, "total_s": t2 - t0, **extra}))
"""


def child(code, args, env):
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    warmed = None
    for w in args.workers:
        fresh = tempfile.mkdtemp()
        env = dict(os.environ, EAGERC_CACHE_DIR=f"{fresh}/eagerc", TORCHINDUCTOR_CACHE_DIR=f"{fresh}/inductor")
        r = child(WARM, [str(w)], env)
        print(f"warm_cache workers={w}: {r['seconds']:.1f} s, {r['compiled']} kernels (+{r['confirm']} by confirm=True), "
              f"{r['calls']} calls, {r['failed']} failed")
        warmed = env
    env = dict(warmed, MODEL_SRC=MODEL)
    code = "import os; MODEL_SRC = os.environ['MODEL_SRC']\n" + FIRST_OUTPUT
    fresh = tempfile.mkdtemp()
    for mode, e in (("eagerc", env), ("cpu", env),
                    ("compile", dict(env, TORCHINDUCTOR_CACHE_DIR=f"{fresh}/inductor"))):
        r = child(code, [mode], e)
        extra = f", compiles {r['compiles']}" if "compiles" in r else ""
        print(f"first output, fresh process, {mode:<8}: import {r['import_s']:.2f} s + first call "
              f"{r['first_output_s']:.2f} s = {r['total_s']:.2f} s{extra}")


if __name__ == "__main__":
    main()
