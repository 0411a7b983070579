"""A model's first run on empty caches: CPU eager's first `generate` against the eagerc
device's first `generate`, each in a fresh process.

Every round starts from empty kernel caches (a new EAGERC_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR) and runs both processes, the order alternating between rounds;
the medians of the first `generate` times and their ratio are printed, with the tokens
checked equal. The device's process then waits for the compile service (how long its
kernels took to reach the cache), and a third fresh process on the same caches times the
next run (it should find every kernel in the cache).

    python tools/bench_first_run.py --rounds 3
    python tools/bench_first_run.py --rounds 1 --compile now     # misses wait for their compile
    python tools/bench_first_run.py --device mydevice            # the vendor example device

``--device mydevice`` runs examples/mydevice (host memory: a miss is answered on zero-copy
aliases, as on the eagerc device; EAGERC_ALIAS_FALLBACK=0 in the environment makes it the
host round trip) as pip would install it: its distribution metadata in a
temporary folder on the device process's path, so `import torch` loads it through the
``torch.backends`` entry point, in the caller and in the compile service's workers alike.

Each line also gives the main thread's CPU time over the first `generate` (what the busy
machine's other work does not inflate, as it does the seconds) and, on the device, the part
spent in eagerc's miss path (its resolver). The children find eagerc's modules compiled, as
an installed package has them (compiled_as_installed).

Model: transformers' GPT-2 from a tiny config (1 layer, 64 wide, 2 heads, vocabulary 256),
12 new tokens, greedy.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

CHILD = r"""
import json, os, sys, time
import torch
import transformers

kind, device = sys.argv[1], sys.argv[2]
miss_path = [0.0]  # CPU seconds of the main thread inside eagerc's resolver
if kind != "cpu":
    import eagerc
    from eagerc import _C
    from eagerc.per_op import registration

    def timed(request):
        started = time.thread_time()
        try:
            return registration._resolve(request)  # imports the resolver at the first miss
        finally:
            miss_path[0] += time.thread_time() - started

    registration._install_resolver()
    _C._set_resolver(timed)
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=256, n_positions=64)
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 256, (1, 8))
mask = torch.ones_like(ids)
device = "cpu" if kind == "cpu" else device
model, ids, mask = model.to(device), ids.to(device), mask.to(device)
start, thread_start = time.perf_counter(), time.thread_time()
with torch.no_grad():
    out = model.generate(ids, attention_mask=mask, max_new_tokens=12, min_new_tokens=12,
                         do_sample=False, pad_token_id=0)
seconds = time.perf_counter() - start
result = {"seconds": seconds, "tokens": out.cpu().tolist(),
          "main_cpu": time.thread_time() - thread_start, "miss_path_cpu": miss_path[0]}
if kind != "cpu":
    s = eagerc.stats()
    result.update(interim=s["interim"], compiles=s["compiles"], disk_loads=s["disk_loads"])
    start = time.perf_counter()
    eagerc.wait_compiles()
    result["service_seconds"] = time.perf_counter() - start
print("RESULT " + json.dumps(result))
"""


def installed(name: str, folder: str) -> str:
    """`folder` holding examples/<name>'s distribution metadata as pip installs it (its
    entry points); the package itself is imported from the checkout."""
    project = tomllib.load(open(os.path.join(EXAMPLES, name, "pyproject.toml"), "rb"))["project"]
    info = os.path.join(folder, f"{project['name']}-{project['version']}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, points in project["entry-points"].items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    return folder


def compiled_as_installed() -> dict:
    """Variables under which the children find eagerc's modules compiled, as pip leaves an
    installed package, in a folder of their own (the checkout stays as it is). A checkout
    run with PYTHONDONTWRITEBYTECODE=1 otherwise compiles every module the first generate
    imports on the device's clock (kernel_cache's alone: about 40 ms of CPU)."""
    root = os.path.dirname(EXAMPLES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "eagerc-bench-first-run-pycache")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"/(tests|build)/",
                    *(os.path.join(root, name) for name in ("eagerc", "kernel_cache", "examples"))],
                   env=env, check=True)
    return {k: env[k] for k in ("PYTHONPYCACHEPREFIX",)}


def run(kind: str, env: dict, device: str = "eagerc") -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, kind, device], env=env, capture_output=True, text=True,
                       timeout=1800)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the {kind} process failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", choices=("background", "now"), default="background")
    parser.add_argument("--device", default="eagerc", help="eagerc, or an example's device (mydevice)")
    args = parser.parse_args()
    cpu, device, next_run, main_cpu, miss_path_cpu = [], [], [], [], []
    bytecode = compiled_as_installed()
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="eagerc-first-run-") as tmp:
            env = dict(os.environ, EAGERC_CACHE_DIR=os.path.join(tmp, "eagerc"),
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                       EAGERC_COMPILE=args.compile, **bytecode)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            device_env = dict(env)
            if args.device != "eagerc":
                site = installed(args.device, os.path.join(tmp, "site"))
                device_env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [site, os.path.join(EXAMPLES, args.device), env.get("PYTHONPATH")]))
            order = ("cpu", "device") if round_ % 2 == 0 else ("device", "cpu")
            got = {kind: run(kind, device_env if kind == "device" else env, args.device)
                   for kind in order}
            if got["cpu"]["tokens"] != got["device"]["tokens"]:
                raise SystemExit(f"tokens differ: {got['cpu']['tokens']} vs {got['device']['tokens']}")
            again = run("device", device_env, args.device)
            if again["tokens"] != got["cpu"]["tokens"]:
                raise SystemExit("tokens differ on the next run")
            cpu.append(got["cpu"]["seconds"])
            device.append(got["device"]["seconds"])
            next_run.append(again["seconds"])
            d = got["device"]
            main_cpu.append((got["cpu"]["main_cpu"], d["main_cpu"]))
            miss_path_cpu.append(d["miss_path_cpu"])
            print(f"round {round_ + 1}: CPU eager {got['cpu']['seconds']:.3f} s, device "
                  f"{d['seconds']:.3f} s ({d['seconds'] / got['cpu']['seconds']:.1f}x; "
                  f"{d['interim']} calls interim, {d['compiles']} compiled in the process, "
                  f"kernels in the cache {d['service_seconds']:.1f} s later); next run "
                  f"{again['seconds']:.3f} s ({again['interim']} interim, {again['compiles']} "
                  f"compiled, {again['disk_loads']} loaded); main thread CPU: CPU eager "
                  f"{got['cpu']['main_cpu']:.3f} s, device {d['main_cpu']:.3f} s (its miss path "
                  f"{d['miss_path_cpu']:.3f} s)", flush=True)
    c, d, n = statistics.median(cpu), statistics.median(device), statistics.median(next_run)
    print(f"median of {args.rounds}: CPU eager first generate {c:.3f} s; {args.device} device "
          f"({args.compile}) {d:.3f} s = {d / c:.1f}x; next run {n:.3f} s = {n / c:.1f}x; "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"main thread CPU (medians): CPU eager {statistics.median(c for c, _ in main_cpu):.3f} s, "
          f"device {statistics.median(d for _, d in main_cpu):.3f} s, its miss path "
          f"{statistics.median(miss_path_cpu):.3f} s")


if __name__ == "__main__":
    main()
