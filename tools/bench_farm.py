"""The compile farm on Ray: one warm job (a tiny transformers BERT) through 1, 2, ... Ray
workers, each kernel compiled into a private Redis (the shared tier); then a second host
(a fresh process with empty eagerc and Inductor caches, the same Redis) runs the model.

Each warm run is its own driver process with fresh local caches and a flushed Redis, on a
new local Ray cluster (``cluster="local"``, the machine's CPUs); rounds rotate the worker
counts; medians are reported. ``--no-redis`` measures the farm alone (kernels land in each
run's local cache; no second host), for a machine without a Redis server.

    python tools/bench_farm.py [--workers 1,2] [--rounds 2] [--no-redis] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_warm import bert_source  # noqa: E402  (tools/ is this script's folder)

MODEL = bert_source(hidden=32, heads=2, vocab=100, seq=16, pad_from=8)

WARM = MODEL + r"""
import json, sys, time, eagerc
model, (ids, mask) = bert()
model = model.to("eagerc")
t = time.perf_counter()
r = eagerc.warm_cache(model, ids.to("eagerc"), mask.to("eagerc"), workers=int(sys.argv[1]),
                      cluster="local", confirm=True)  # transformers branches on tracing
print(json.dumps({"seconds": time.perf_counter() - t, "compiled": r.compiled, "calls": r.calls,
                  "cached": r.cached, "confirm": r.compiled_on_confirm, "failed": len(r.failed)}))
"""

SECOND_HOST = MODEL + r"""
import json, time, eagerc
model, (ids, mask) = bert()
model = model.to("eagerc")
t = time.perf_counter()
with torch.no_grad():
    model(ids.to("eagerc"), mask.to("eagerc")).last_hidden_state.cpu()
first = time.perf_counter() - t
model(ids.to("eagerc"), mask.to("eagerc"))
s = eagerc.stats()
print(json.dumps({"compiles": s["compiles"], "loads": s["disk_loads"], "first_output_s": first}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(code: str, args: list, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code] + args, env=env, capture_output=True,
                         text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"a run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fresh_env(root: str, name: str, redis_url: str | None) -> dict:
    env = dict(os.environ, EAGERC_CACHE_DIR=os.path.join(root, name, "eagerc"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(root, name, "inductor"))
    if redis_url:
        env["EAGERC_REMOTE_CACHE"] = redis_url
    env.pop("RAY_ADDRESS", None)
    return env


def _start_redis(root: str):
    """A private redis-server on a free port: (process, url, client)."""
    import redis

    port = _free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", root],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    return server, f"redis://127.0.0.1:{port}/0", client


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--no-redis", action="store_true", help="no shared tier, no second host")
    ap.add_argument("--json", help="write the numbers here too")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    root = tempfile.mkdtemp(prefix="bench_farm-")
    server, url, client = (None, None, None) if args.no_redis else _start_redis(root)
    runs: dict = {w: [] for w in counts}
    second = None
    try:
        for r in range(args.rounds):
            for workers in counts[r % len(counts):] + counts[:r % len(counts)]:
                if client is not None:
                    client.flushall()
                got = _run(WARM, [str(workers)], _fresh_env(root, f"warm-{r}-{workers}", url))
                if client is not None:
                    got["redis_keys"] = client.dbsize()
                runs[workers].append(got)
                print(f"round {r} workers {workers}: {got}", flush=True)
        if client is not None:
            second = _run(SECOND_HOST, [], _fresh_env(root, "second-host", url))
            second["redis_keys"] = client.dbsize()
            print(f"second host: {second}", flush=True)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)
    summary = {w: {"median_s": statistics.median(x["seconds"] for x in v),
                   "compiled": [x["compiled"] for x in v], "calls": v[0]["calls"],
                   "failed": [x["failed"] for x in v],
                   "redis_keys": [x.get("redis_keys") for x in v]}
               for w, v in runs.items()}
    base = summary[counts[0]]["median_s"]
    print(f"warm on Ray ({os.cpu_count()} CPUs): " + ", ".join(
        f"{w} worker(s) {summary[w]['median_s']:.1f} s (x{base / summary[w]['median_s']:.2f})"
        for w in counts) + "; kernels compiled " + str({w: summary[w]["compiled"] for w in counts}))
    if second is not None:
        print(f"second host compiled {second['compiles']}, loaded {second['loads']}, "
              f"first output {second['first_output_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "summary": summary, "second_host": second,
                       "speedups": {w: base / summary[w]["median_s"] for w in counts}}, f, indent=1)


if __name__ == "__main__":
    main()
