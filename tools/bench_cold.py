"""Fresh-process costs: import, enable, and the first call of an already-cached kernel.

    python tools/bench_cold.py [--runs 5]

Warms a private cache directory once, then starts `runs` fresh processes that each time
`import eagerc`, `eagerc.enable("cpu")`, the first call of cached kernels (abs, add,
softmax: a disk load each) and a second call (a hit). Prints medians.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import eagerc
t2 = time.perf_counter()
eagerc.enable("cpu")
t3 = time.perf_counter()
x = torch.randn(64, 64)
out = {"import_torch_s": t1 - t0, "import_eagerc_s": t2 - t1, "enable_cpu_s": t3 - t2}
for name, fn in (("abs", lambda: torch.abs(x)), ("add", lambda: torch.add(x, x, alpha=2)),
                 ("softmax", lambda: torch.softmax(x, -1))):
    a = time.perf_counter(); fn(); b = time.perf_counter(); fn(); c = time.perf_counter()
    out[name + "_first_ms"] = (b - a) * 1e3
    out[name + "_second_us"] = (c - b) * 1e6
s = eagerc.stats()
out["compiles"] = s["compiles"]
out["disk_loads"] = s["disk_loads"]
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, EAGERC_CACHE_DIR=tempfile.mkdtemp(prefix="eagerc-cold-"))
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True)  # fill the cache
    results = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True, text=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert all(r["compiles"] == 0 for r in results), "a warm-cache process compiled"
    for key in results[0]:
        print(f"{key:<22} {statistics.median(r[key] for r in results):10.4f}")


if __name__ == "__main__":
    main()
