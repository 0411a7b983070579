"""``torch.eagerc``: the device module of the eagerc reference device.

One device (index 0) whose kernels run synchronously on the calling thread; its random
numbers come from one CPU-style (mt19937) default generator, which torch.manual_seed
also seeds.

    >>> import torch, eagerc.device
    >>> _ = eagerc.device.register()
    >>> torch.eagerc.manual_seed(0); state = torch.eagerc.get_rng_state()
    >>> torch.eagerc.set_rng_state(state); torch.eagerc.initial_seed()
    0
"""
from __future__ import annotations

import torch

__all__ = [
    "current_device",
    "device_count",
    "empty_cache",
    "get_rng_state",
    "initial_seed",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "synchronize",
    "Event",
    "Stream",
    "current_stream",
    "stream",
]

_generator: torch.Generator | None = None


def _default_generator(device=None) -> torch.Generator:
    global _generator
    _check_device(device)
    if _generator is None:
        from eagerc import _C

        _generator = _C._device_default_generator(0)
    return _generator


def _check_device(device) -> None:
    if device is None:
        return
    index = device if isinstance(device, int) else torch.device(device).index
    if index not in (None, -1, 0):
        raise ValueError(f"eagerc has exactly one device, index 0; got device {device!r}")


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    # Host memory and a synchronous runtime survive fork.
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _check_device(device)


def synchronize(device=None) -> None:
    """No-op: every eagerc kernel has finished when its call returns."""
    _check_device(device)


# Streams for device-agnostic code (FSDP2 overlaps its collectives on side streams,
# torch.distributed.checkpoint stages copies on one): the device has one in-order stream
# (on host memory a call has finished when it returns; on GPU memory every kernel runs on
# CUDA's current stream), so a side stream, an event and a wait between them are
# orderings that already hold: torch.cpu's no-op ones, and a stream's synchronize is the
# device's.
class Stream(torch.cpu.Stream):
    def synchronize(self) -> None:
        torch.accelerator.synchronize()

    def query(self) -> bool:
        return True


Event = torch.cpu.Event
stream = torch.cpu.stream
_stream = Stream()


def current_stream(device=None) -> Stream:
    _check_device(device)
    return _stream


def empty_cache() -> None:
    """Return the device's cached free memory blocks to the system allocator.

    Freed device memory is kept by size for the next allocation of that size (up to
    256 MiB in all), as torch.cuda's caching allocator keeps it.

        >>> import torch, eagerc
        >>> x = torch.empty(1024, device="eagerc"); del x
        >>> torch.eagerc.empty_cache(); eagerc._C._device_cached_bytes()
        0
    """
    from eagerc import _C

    _C._device_empty_cache()


def manual_seed(seed: int) -> None:
    # Random kernels on eagerc are compiled for the CPU target, and Inductor's compiled
    # random ops draw their seeds from the CPU default generator: seeding it too is what
    # makes torch.eagerc.manual_seed reproduce random ops on this device.
    _default_generator().manual_seed(int(seed))
    torch.random.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    _default_generator().seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return _default_generator().initial_seed()


def get_rng_state(device="eagerc") -> torch.Tensor:
    """The default generator's state, as a CPU uint8 tensor (as torch.cuda's)."""
    return _default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="eagerc") -> None:
    _default_generator(device).set_state(new_state)


# The device's Inductor backend, looked up here by Inductor (torch.compile on "eagerc");
# loaded on first access so that `import eagerc` does not import Inductor.
_INDUCTOR_BACKEND = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name: str):
    # torch.eagerc.default_generators, like torch.cuda.default_generators.
    if name == "default_generators":
        return (_default_generator(),)
    if name in _INDUCTOR_BACKEND:
        from eagerc.device import inductor_backend

        found = getattr(inductor_backend, name)
        if found is not None:
            return found
    raise AttributeError(f"module 'torch.eagerc' has no attribute {name!r}")
