"""Cost of `import eagerc` on top of `import torch`, in fresh processes.

    python tools/bench_import.py [--runs 15]

Prints the median seconds of `import eagerc` (torch already imported) and how many modules
it adds, with the heaviest packages among them (torch.fx, sympy, the capture monitor).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_PROBE = r"""
import json, sys, time
import torch
before = set(sys.modules)
t = time.perf_counter()
import eagerc
seconds = time.perf_counter() - t
added = sorted(set(sys.modules) - before)
print(json.dumps({"seconds": seconds, "added": added}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    added = runs[-1]["added"]
    families = {}
    for name in added:
        root = ".".join(name.split(".")[:2])
        families[root] = families.get(root, 0) + 1
    print(f"import eagerc (torch already imported): median {statistics.median(r['seconds'] for r in runs) * 1e3:.1f} ms "
          f"over {len(runs)} fresh processes; {len(added)} modules added")
    for root, n in sorted(families.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {root:40s} {n}")


if __name__ == "__main__":
    main()
