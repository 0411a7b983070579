"""Host time per convolution call on the eagerc device with GPU memory against native CUDA
eager, same process (run on the GPU machine; EAGERC_BACKING=cuda):

    EAGERC_BACKING=cuda python tools/bench_gpu_convs.py [--rounds 11]

Three call patterns, each a loop over 12 convolutions on 8x8 inputs (small enough that the
host, not the GPU, sets the pace):
- one: the same convolution 12 times (one kernel, its guard always the same values);
- same_key: 12 weight shapes of a 1x1 convolution, which share a signature key (the
  holder tries the key's variants in turn; their guards decide), as ResNet's do;
- distinct: 12 convolutions with keys of their own (kernel sizes and paddings).
Alternating rounds (native, then the device), medians of the mean time per call.
`EAGERC_GPU_LAUNCHER=0` compares with g++-built wrappers instead of launch plans.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import eagerc  # noqa: F401 - registers the eagerc device


def _cases(device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    inputs = {c: torch.randn(1, c, 8, 8, generator=g).to(device) for c in (32, 64, 96)}
    same_key = [(inputs[ci], torch.randn(co, ci, 1, 1, generator=g).to(device), {})
                for ci in (32, 64, 96) for co in (16, 32, 48, 64)]
    distinct = [(inputs[32], torch.randn(32, 32, k, k, generator=g).to(device), {"padding": p})
                for k in (1, 3) for p in range(6)]
    return {"one": [same_key[0]] * 12, "same_key": same_key, "distinct": distinct}


def _per_call_us(convs, loops: int = 40) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(loops):
        for x, w, kw in convs:
            F.conv2d(x, w, **kw)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / loops / len(convs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    native, device = _cases("cuda"), _cases("eagerc")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print(f"{'pattern':<9} {'native us':>9} {'device us':>9} {'diff':>7}")
    with torch.no_grad():
        for name in native:
            for _ in range(2):  # compiles, then warms
                _per_call_us(native[name], 2), _per_call_us(device[name], 2)
            nat, dev = [], []
            for _ in range(args.rounds):
                nat.append(_per_call_us(native[name]))
                dev.append(_per_call_us(device[name]))
            nat, dev = statistics.median(nat), statistics.median(dev)
            print(f"{name:<9} {nat:>9.2f} {dev:>9.2f} {dev - nat:>+7.2f}", flush=True)


if __name__ == "__main__":
    main()
