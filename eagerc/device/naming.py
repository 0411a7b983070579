"""What names the eagerc device: its type name and the index a device argument means.

A leaf of eagerc/device/: the device's module, its memory statistics, its streams, its
Inductor backend and compile_on_home all read it, and it imports none of them."""
from __future__ import annotations

import torch

NAME = "eagerc"


def on_gpu_memory() -> bool:
    from eagerc import _config

    return _config.device_backing() == "cuda"


def index(device) -> int:
    """The device index `device` names (an int, "eagerc:1", a torch.device; None or no
    index: the current one); ValueError for an index the device does not have."""
    import _eagerc as _C

    if device is None:
        return _C._device_current()
    if isinstance(device, int):
        number = device
    else:
        device = torch.device(device)
        if device.type != NAME:
            raise ValueError(f"expected an eagerc device, got {device!r}")
        number = device.index
    if number is None or number == -1:
        return _C._device_current()
    count = _C._device_count()
    if not 0 <= number < count:
        what = ("exactly one device, index 0" if count == 1 and not on_gpu_memory()
                else f"{count} device(s), one per GPU")
        raise ValueError(f"eagerc has {what}; got device {device!r}")
    return number
