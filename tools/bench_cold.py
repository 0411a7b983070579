"""Fresh-process costs: import, enable, and the first call of an already-cached kernel;
with --compile, the cold compile of one kernel.

    python tools/bench_cold.py [--runs 5]
    python tools/bench_cold.py --compile [--runs 3] [--tree DIR --tree DIR]

Default: warms a private cache directory once, then starts `runs` fresh processes that
each time `import eagerc`, `eagerc.enable("cpu")`, the first call of cached kernels (abs,
add, softmax: a disk load each) and a second call (a hit). Prints medians.

--compile: starts `runs` fresh processes, each with an empty eagerc cache *and* an empty
Inductor cache (TORCHINDUCTOR_CACHE_DIR), that time the first call (trace + compile +
load + run) of each kernel in COMPILE_OPS on 64x64 float32 inputs. The first compile of
a process also pays one-time costs (Inductor's lazy imports, its CPU ISA probe, hashing
the precompiled headers) and is reported separately (`first compile`, a neg), not in the
median. Precompiled headers live in Inductor's per-machine directory, outside
TORCHINDUCTOR_CACHE_DIR: built once per machine (and per compiler/flags), then reused.
Prints each kernel's median over processes and the median over kernels, and beside them
the CPU seconds its compiler processes used (g++/clang and the link, summed), those of the
process itself (Python: tracing, Inductor's lowering, scheduling and code generation, the
load) and their sum: on a machine busy with other jobs the wall time mostly measures
waiting for a core, the CPU seconds do not (the honest proxy for an idle machine's time,
less what two cores overlap), and the load average before and after.

Children run with EAGERC_COMPILE=now (the default answers a miss at once and compiles in
the background). EAGERC_CLANG=0 in this script's environment compiles every unit with g++
(codegen/cpp/clang_units.py), for A/B runs.

--tree DIR (repeatable, with --compile): A/B of source trees on one machine at one time.
Each run starts one child per tree, in turn, whose `import eagerc` loads DIR/eagerc (an
unpacked commit: `git archive COMMIT eagerc kernel_cache | tar -x -C DIR`; the installed
C++ extension is shared, so each tree's Python must match it: a rebuild of csrc/ with a
changed binding retires older trees), and prints one table per tree. "." is this checkout.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
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


COMPILE_OPS = ["abs", "add_alpha2", "sum_dim1", "softmax", "layer_norm", "mul", "relu", "exp",
               "mean", "where"]

COMPILE_CHILD = r"""
import json, os, resource, sys, time
tree = os.environ.get("EAGERC_BENCH_TREE")
if tree:  # this tree's eagerc, not the editable install's
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("_editable")]
    sys.path.insert(0, tree)
import torch
import eagerc
x = torch.randn(64, 64)
y = torch.randn(64, 64)
mask = torch.randn(64, 64) > 0          # made before enable: not a compile
ops = {
    "abs": lambda: torch.abs(x),
    "add_alpha2": lambda: torch.add(x, y, alpha=2),
    "sum_dim1": lambda: x.sum(1),
    "softmax": lambda: torch.softmax(x, -1),
    "layer_norm": lambda: torch.nn.functional.layer_norm(x, (64,)),
    "mul": lambda: x * y,
    "relu": lambda: torch.relu(x),
    "exp": lambda: torch.exp(x),
    "mean": lambda: x.mean(),
    "where": lambda: torch.where(mask, x, y),
}
eagerc.enable("cpu")
out = {"eagerc": eagerc.__file__}
for name, fn in [("first compile", lambda: torch.neg(x))] + [(n, ops[n]) for n in sys.argv[1:]]:
    before = eagerc.stats()["compiles"]
    c, p = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter(); fn(); out[name] = time.perf_counter() - t
    d, q = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    out[name + ":cpu"] = d.ru_utime + d.ru_stime - c.ru_utime - c.ru_stime
    out[name + ":python"] = q.ru_utime + q.ru_stime - p.ru_utime - p.ru_stime
    out[name + ":compiles"] = eagerc.stats()["compiles"] - before
print(json.dumps(out))
"""


def bench_compile(runs: int, trees=(".",)) -> None:
    """Cold compile per kernel: fresh eagerc and Inductor caches in each child process; one
    child per tree in each run (alternating, so every tree sees the same load)."""
    results = {tree: [] for tree in trees}
    load_before = os.getloadavg()
    for _ in range(runs):
        for tree in trees:
            results[tree].append(_compile_child(tree))
    for tree in trees:
        if len(trees) > 1:
            print(f"tree {tree}:")
        _print_compile(results[tree], runs)
    print("load average before, after: " + ", ".join(f"{a:.2f}" for a in load_before + os.getloadavg()))


def _compile_child(tree: str) -> dict:
    dirs = [tempfile.mkdtemp(prefix="eagerc-cold-"), tempfile.mkdtemp(prefix="inductor-cold-")]
    env = dict(os.environ, EAGERC_CACHE_DIR=dirs[0], TORCHINDUCTOR_CACHE_DIR=dirs[1],
               EAGERC_COMPILE="now")
    if tree != ".":
        env["EAGERC_BENCH_TREE"] = os.path.abspath(tree)
    try:
        out = subprocess.run([sys.executable, "-c", COMPILE_CHILD, *COMPILE_OPS], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"the child for tree {tree} failed:\n{out.stderr[-3000:]}")
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    missing = [k for k in ["first compile", *COMPILE_OPS] if result[k + ":compiles"] != 1]
    assert not missing, f"not exactly one compile for {missing}"
    assert tree == "." or result["eagerc"].startswith(env["EAGERC_BENCH_TREE"]), result["eagerc"]
    return result


def _print_compile(results: list, runs: int) -> None:
    print(f"{'kernel':<16} {'median s':>9} {'min s':>7} {'compiler CPU s':>15} {'process CPU s':>14}"
          f" {'total CPU s':>12}   ({runs} fresh processes)")
    medians, cpus, pythons, totals = [], [], [], []
    for name in COMPILE_OPS:
        times = [r[name] for r in results]
        medians.append(statistics.median(times))
        cpus.append(statistics.median(r[name + ":cpu"] for r in results))
        pythons.append(statistics.median(r[name + ":python"] for r in results))
        totals.append(statistics.median(r[name + ":cpu"] + r[name + ":python"] for r in results))
        print(f"{name:<16} {medians[-1]:9.3f} {min(times):7.3f} {cpus[-1]:15.3f} {pythons[-1]:14.3f}"
              f" {totals[-1]:12.3f}")
    first = [r["first compile"] for r in results]
    print(f"{'(first compile)':<16} {statistics.median(first):9.3f} {min(first):7.3f}"
          "   not in the median")
    print(f"median per kernel: {statistics.median(medians):.3f} s wall; CPU {statistics.median(totals):.3f} s"
          f" (compiler {statistics.median(cpus):.3f} s, process {statistics.median(pythons):.3f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=None,
                        help="fresh processes (default 5; 3 with --compile)")
    parser.add_argument("--compile", action="store_true",
                        help="cold compile per kernel (empty eagerc and Inductor caches)")
    parser.add_argument("--tree", action="append", default=None,
                        help="with --compile: a source tree to time (repeat for A/B; '.' is this checkout)")
    args = parser.parse_args()
    if args.compile:
        bench_compile(args.runs or 3, tuple(args.tree or ["."]))
        return
    args.runs = args.runs or 5
    env = dict(os.environ, EAGERC_CACHE_DIR=tempfile.mkdtemp(prefix="eagerc-cold-"), EAGERC_COMPILE="now")
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
