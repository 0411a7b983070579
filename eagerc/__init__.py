"""eagerc: an eager-mode PyTorch backend whose ATen kernels are compiled by TorchInductor.

Each ATen op that reaches an enabled device is compiled on its first call (C++ on CPUs,
Triton on GPUs), cached on disk, and run from a C++ kernel holder on every later call.

    >>> import torch, eagerc
    >>> served = eagerc.enable("cpu")   # the ops eagerc now serves on the CPU
    >>> "aten::softmax.int" in served or "aten::_softmax" in served
    True
    >>> y = torch.softmax(torch.randn(37, 91), dim=-1)
    >>> counters = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    >>> counters["hits"] + counters["misses"] >= 1
    True
    >>> eagerc.disable("cpu")
"""
import torch  # noqa: F401  (loads libtorch before eagerc._C)

from eagerc._api import disable, enable, enabled, reset_stats, stats
from eagerc.capture import capture, capture_stats

__version__ = "0.1.0"


def _register_device() -> None:
    """`import eagerc` makes the eagerc device usable: its hand-written runtime is
    registered, and every other op on it is served by compiled kernels (registering
    takes milliseconds; nothing compiles until an op runs)."""
    from eagerc import device

    if device.register():
        enable(device.NAME)


_register_device()

__all__ = [
    "enable",
    "disable",
    "enabled",
    "stats",
    "reset_stats",
    "capture",
    "capture_stats",
]
