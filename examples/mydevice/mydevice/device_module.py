"""``torch.mydevice``: what torch asks a device's Python module (one device, index 0, whose
kernels finish when their call returns)."""
from __future__ import annotations

import torch


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False  # host memory and a synchronous runtime survive fork


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    index = device if isinstance(device, int) else torch.device(device).index
    if index not in (None, 0):
        raise ValueError(f"mydevice has one device, index 0; got {device!r}")


def synchronize(device=None) -> None:
    """Nothing to wait for: every kernel has finished when its call returns."""


def manual_seed(seed: int) -> None:
    # Compiled random kernels draw their seeds from the CPU's default generator.
    torch.random.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)
