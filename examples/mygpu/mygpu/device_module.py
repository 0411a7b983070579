"""``torch.mygpu``: what torch asks a device's Python module. mygpu:N is cuda:N's memory, so
each answer is CUDA's for the same index (its devices, current device, streams' work,
generators)."""
from __future__ import annotations

import torch


def _index(device) -> int | None:
    if device is None or isinstance(device, int):
        return device
    return torch.device(device).index


def is_available() -> bool:
    return torch.cuda.is_available()


def is_initialized() -> bool:
    return torch.cuda.is_initialized()


def _lazy_init() -> None:
    torch.cuda.init()


def _is_in_bad_fork() -> bool:
    return torch.cuda._is_in_bad_fork()  # a forked child cannot use its parent's CUDA context


def device_count() -> int:
    return torch.cuda.device_count()


def current_device() -> int:
    return torch.cuda.current_device()


def set_device(device) -> None:
    index = _index(device)
    if index is not None:
        torch.cuda.set_device(index)


def synchronize(device=None) -> None:
    """Wait for the work queued on the device's streams (its GPU's)."""
    torch.cuda.synchronize(_index(device))


def manual_seed(seed: int) -> None:
    # The device's generators are its GPUs' (csrc/runtime.cpp, Hooks).
    torch.cuda.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    torch.cuda.manual_seed_all(int(seed))


def get_rng_state(device="mygpu") -> torch.Tensor:
    return torch.cuda.get_rng_state(_index(device) or 0)


def set_rng_state(new_state: torch.Tensor, device="mygpu") -> None:
    torch.cuda.set_rng_state(new_state, _index(device) or 0)
