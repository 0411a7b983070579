"""Hit cost of eagerc's compiled kernels against native eager, same process.

    python tools/bench_hit.py [--size 64] [--repeats 200] [--threads 1] [--device cpu] [--aoti]

For each op (kernel compiled first): `repeats` alternating rounds, each one sample of the
mean time of one call in a loop of `inner` calls natively, then one with eagerc enabled for
that op; medians of both. Prints a table with the ratio eagerc / native. On a device with
no kernels of its own (``--device eagerc``), every call is a compiled kernel: its native
side is the same call on its memory's home device (CPU eager for host memory).

`--aoti` adds PyTorch's own AOTI-eager (``Library._impl_with_aoti_compile``) to every round
as a third column: it is registered for the round and removed after it, so the native
sample stays native (its first call per op compiles, tens of seconds, outside the rounds).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import torch
import torch.nn.functional as F

# Hits are what is timed: each warm-up miss compiles before it answers (the default answers
# at once and compiles in the compile service, leaving the first timed calls interim).
os.environ.setdefault("EAGERC_COMPILE", "now")

import eagerc  # noqa: E402
from eagerc import targets  # noqa: E402


def _sample_us(fn, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner * 1e6


def cases(size: int, device: str):
    """(name, eagerc op, AOTI-eager op name, call); the same values on every device."""
    torch.manual_seed(0)
    x = torch.randn(size, size, device=device)
    y = torch.randn(size, size, device=device)
    w, b = torch.randn(size, device=device), torch.randn(size, device=device)
    return [
        ("abs", "aten::abs", "abs", lambda: torch.abs(x)),
        ("add(alpha=2)", "aten::add.Tensor", "add.Tensor", lambda: torch.add(x, y, alpha=2)),
        ("sum(dim=1)", "aten::sum.dim_IntList", "sum.dim_IntList", lambda: torch.sum(x, dim=1)),
        ("softmax", "aten::_softmax", "_softmax", lambda: torch.softmax(x, dim=-1)),
        ("layer_norm", "aten::native_layer_norm", "native_layer_norm",
         lambda: F.layer_norm(x, (size,), w, b)),
        (f"mm {size}x{size}", "aten::mm", "mm", lambda: torch.mm(x, y)),
        (f"addmm {size}x{size}", "aten::addmm", "addmm", lambda: torch.addmm(b, x, y)),
    ]


@contextlib.contextmanager
def _aoti_eager(op_name: str, device: str):
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib._impl_with_aoti_compile(op_name, "CPU" if device == "cpu" else "CUDA")
        yield
    finally:
        lib._destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--inner", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--aoti", action="store_true", help="add PyTorch's AOTI-eager column")
    parser.add_argument("--ops", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = targets.for_device(args.device)
    # A new device (the eagerc device) has no native kernels to time: CPU or CUDA eager on
    # its memory's home stands in, and its own calls are served whether enabled or not.
    native_device = target.home if target.new_device else args.device
    sync = torch.cuda.synchronize if native_device.startswith("cuda") else (lambda: None)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {args.size}x{args.size} float32, "
          f"device {args.device}" + (f" (native: {native_device} eager)" if native_device != args.device else ""))
    header = f"{'op':<14} {'native us':>10} {'eagerc us':>10} {'ratio':>7}"
    print(header + (f" {'aoti us':>10} {'aoti ratio':>10}" if args.aoti else ""))
    wanted = set(filter(None, args.ops.split(",")))
    device_cases = cases(args.size, args.device)
    native_calls = [call for *_, call in (device_cases if native_device == args.device
                                          else cases(args.size, native_device))]
    for (name, op, aoti_op, fn), native_fn in zip(device_cases, native_calls):
        if wanted and name not in wanted:
            continue
        with eagerc.enabled(args.device, ops=[op]):
            fn()  # compile (or load from the cache)
        compiles = eagerc.stats()["compiles"]
        aoti_refused = None
        if args.aoti:
            try:
                with _aoti_eager(aoti_op, native_device):
                    native_fn()  # AOTI-eager's compile
            except Exception as e:  # noqa: BLE001 - reported in the table
                aoti_refused = f"{type(e).__name__}: {str(e)[:60]}"
        native, compiled, aoti = [], [], []
        for _ in range(args.repeats):  # alternating rounds: load drifts hit both sides alike
            for _ in range(3):
                native_fn()
            native.append(_sample_us(native_fn, args.inner))
            sync()
            with eagerc.enabled(args.device, ops=[op]):
                for _ in range(3):
                    fn()
                compiled.append(_sample_us(fn, args.inner))
                sync()
            if args.aoti and not aoti_refused:
                with _aoti_eager(aoti_op, native_device):
                    for _ in range(3):
                        native_fn()
                    aoti.append(_sample_us(native_fn, args.inner))
                    sync()
        assert eagerc.stats()["compiles"] == compiles, "a hit recompiled"
        assert eagerc.stats()["ops"][f"{op}@{target.dispatch_key}"]["hits"] > 0
        n, c = statistics.median(native), statistics.median(compiled)
        line = f"{name:<14} {n:>10.2f} {c:>10.2f} {c / n:>7.2f}"
        if args.aoti and aoti_refused:
            line += f"  AOTI-eager cannot serve it ({aoti_refused})"
        elif args.aoti:
            a = statistics.median(aoti)
            line += f" {a:>10.2f} {a / n:>10.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
