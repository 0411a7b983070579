"""Cost of a call answered in the interim while its signature's job waits at the compile
service (background mode, the default), against native eager and against the least such
a call can cost.

    python tools/bench_interim.py [--calls 300] [--rounds 60] [--threads 1]

Each case's signature misses once (its job is queued), then is timed in `rounds`
alternating samples of `calls` calls each:

- ``pending``: eagerc's miss path, the job still queued. The service's folder lock is held
  by this process, so the service counts as alive and takes no job: the state of a busy
  service, without its compiles on the machine's cores.
- ``floor``: the same calls with a resolver that answers every miss in the interim at once
  (the C++ miss, its request and the interim kernel: what no Python step can take away).

Prints the fastest sample of each (microseconds per call; on a busy machine the slower
samples measure its other work) and pending - floor, what the miss path adds.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import sys
import tempfile
import time

_tmp = tempfile.mkdtemp(prefix="eagerc-bench-interim-")
# Before torch: the service's folder is named by these (Inductor sets its cache variable
# when first asked, which would name another folder than the one held here).
os.environ["EAGERC_CACHE_DIR"] = os.path.join(_tmp, "eagerc")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_tmp, "inductor")
os.environ["EAGERC_COMPILE"] = "background"

import torch  # noqa: E402

import eagerc  # noqa: E402
from eagerc import _C  # noqa: E402
from eagerc.compile_service import spool  # noqa: E402
from eagerc.compile_service.client import folder_for  # noqa: E402
from eagerc.per_op import background, registration  # noqa: E402


def _hold_the_service_lock() -> int:
    folder = folder_for(os.environ)
    spool.make_folders(folder)
    fd = os.open(os.path.join(folder, spool.LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def cases():
    x, y = torch.randn(16, 16), torch.randn(16, 16)
    return [
        ("abs", "aten::abs", lambda: torch.abs(x)),
        ("add(alpha=2)", "aten::add.Tensor", lambda: torch.add(x, y, alpha=2)),
        ("sum(dim=1)", "aten::sum.dim_IntList", lambda: torch.sum(x, dim=1)),
        ("clamp(-1, 1)", "aten::clamp", lambda: torch.clamp(x, -1, 1)),
    ]


def _sample_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def _interim_at_once(request):
    return _C.MissAnswer.interim()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads: one, so the ATen kernel's threads do not "
                             "wait for each other on a busy machine (0: leave)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lock = _hold_the_service_lock()
    all_cases = cases()
    eagerc.enable("cpu", ops=[op for _, op, _ in all_cases], compile="background")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, 16x16 float32; "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'op':<14} {'pending us':>11} {'floor us':>9} {'added us':>9}")
    try:
        for name, op, call in all_cases:
            call()  # the miss: queued at the (held) service
            queued = list(background.jobs()._queued.values())
            if not queued or any(where[0] != folder_for(os.environ) for where in queued):
                sys.exit("the job was not queued at the held service's folder")
            before = eagerc.stats()["interim"]
            pending, floor = [], []
            for _ in range(args.rounds):
                pending.append(_sample_us(call, args.calls))
                _C._set_resolver(_interim_at_once)
                try:
                    floor.append(_sample_us(call, args.calls))
                finally:
                    _C._set_resolver(registration._resolve)
            if eagerc.stats()["interim"] - before != 2 * args.rounds * args.calls:
                sys.exit(f"{name}: not every timed call was answered in the interim")
            p, f = min(pending), min(floor)
            print(f"{name:<14} {p:>11.2f} {f:>9.2f} {p - f:>9.2f}", flush=True)
    finally:
        eagerc.disable("cpu")
        os.close(lock)


if __name__ == "__main__":
    main()
