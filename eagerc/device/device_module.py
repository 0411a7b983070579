"""``torch.eagerc``: the device module of the eagerc reference device.

On host memory, one device (index 0) whose kernels run synchronously on the calling
thread. On GPU memory (``EAGERC_BACKING=cuda``), one device per CUDA GPU: ``eagerc:N``'s
memory and kernels are ``cuda:N``'s, and the current eagerc device is CUDA's current
device (``set_device`` sets both; csrc/device/guard.cpp). The device's generators keep
their state in a generator of its memory's home (csrc/device/hooks.cpp): a CPU (mt19937)
one on host memory, cuda:N's (Philox) on GPU memory. ``torch.Generator("eagerc")`` seeded
s gives the numbers the home's eager kernels give with a home generator seeded s (a random
op called with it runs the home's kernel on aliases). Each index's default generator is
its home's default generator (the CPU's; on GPU memory cuda:N's), which the device's
random ops draw from: ``torch.manual_seed`` seeds it, and ``get_rng_state``/
``set_rng_state`` carry its state. On host memory they run the CPU's kernels on aliases
(seed s gives CPU eager's numbers for seed s); on GPU memory they are compiled and follow
the seed with a stream of their own (Inductor's), not CUDA eager's numbers.

    >>> import torch, eagerc.device
    >>> _ = eagerc.device.register()
    >>> torch.eagerc.manual_seed(0); state = torch.eagerc.get_rng_state()
    >>> torch.eagerc.set_rng_state(state); torch.eagerc.initial_seed()
    0
"""
from __future__ import annotations

import types

import torch

# Memory statistics and streams, as torch.cuda names them (host memory or CUDA's).
from eagerc.device import memory, streams
from eagerc.device.naming import index as _index
from eagerc.device.naming import on_gpu_memory as _on_gpu_memory
from eagerc.device.memory import (empty_cache, max_memory_allocated, max_memory_reserved,  # noqa: F401
                                  mem_get_info, memory_allocated, memory_reserved, memory_stats,
                                  reset_accumulated_memory_stats, reset_peak_memory_stats)
from eagerc.device.streams import (Event, Stream, current_stream, default_stream,  # noqa: F401
                                   set_stream, stream)

__all__ = [
    "current_device",
    "device_count",
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
    "device",
]
# The memory and stream functions imported above, as torch.cuda names them.
__all__ += memory.__all__ + streams.__all__

_generators: dict = {}


def get_amp_supported_dtype() -> list:
    """The lower-precision dtypes autocast may cast to on the device (torch.amp asks every
    accelerator's module; torch.utils.checkpoint builds an autocast context for the current
    accelerator, which `import eagerc` makes this device, even around CPU-only code).
    Both compile on every code generator eagerc has."""
    return [torch.float16, torch.bfloat16]


def _default_generator(device=None) -> torch.Generator:
    index = _index(device)
    if index not in _generators:
        import _eagerc as _C

        _generators[index] = _C._device_default_generator(index)
    return _generators[index]


# Whether this process has put a tensor on the device (torch calls _lazy_init then).
_in_use = False


def is_available() -> bool:
    """Whether the program uses the device: True from its first tensor on the device on.

    The device is torch's accelerator once eagerc is imported, and frameworks choose their
    default device by asking whether the accelerator is available (accelerate's
    ``Accelerator()``, transformers' ``Trainer``, ``nn.DataParallel``, DataLoader's pinning).
    A program that imports eagerc but never places a tensor on its device keeps their CPU
    defaults that way; one that does (``model.to("eagerc")``) gets the device, as a CUDA
    program gets CUDA. ``ACCELERATE_TORCH_DEVICE=eagerc`` names it for accelerate before any
    tensor exists."""
    return _in_use


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """torch's lazy device initialisation calls this before the device's first tensor, and
    only a backend module that has it is marked initialized: without it, torch.accelerator
    treats the device as never initialized and its synchronize() returns at once. The
    runtime itself needs no set-up (on GPU memory CUDA initialises with the first alias)."""
    global _in_use
    _in_use = True


def _load_index(location, optional: bool = False) -> int:
    """The index torch.load maps `location` ("eagerc", "eagerc:0") to. torch.serialization
    asks it before checking is_available(): a program that loads onto the device is putting
    tensors on it, so from here on the device is in use."""
    _lazy_init()
    device = torch.device(location)
    if device.index is not None:
        return device.index
    return current_device() if optional else 0


# What torch.serialization looks up on a device module (torch.cuda._utils has the same).
_utils = types.SimpleNamespace(_get_device_index=_load_index)


def _is_in_bad_fork() -> bool:
    # Host memory and a synchronous runtime survive fork.
    return False


def device_count() -> int:
    """1 on host memory; the number of CUDA GPUs on GPU memory."""
    import _eagerc as _C

    return _C._device_count()


def current_device() -> int:
    import _eagerc as _C

    return _C._device_current()


def set_device(device) -> None:
    """Make `device` current (on GPU memory: CUDA's current device as well)."""
    import _eagerc as _C

    _C._device_set_current(_index(device))


class device:
    """Context manager that makes `device` (an index or an eagerc device) current, as
    torch.cuda.device; None changes nothing."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx != -1 and self.idx != self.prev_idx:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx != -1 and self.idx != self.prev_idx:
            set_device(self.prev_idx)
        return False


def synchronize(device=None) -> None:
    """Wait for the device's kernels: a no-op on host memory (every call has finished when
    it returns), the GPU's current stream on GPU memory."""
    index = _index(device)
    if _on_gpu_memory():
        torch.cuda.synchronize(index)



def _seed_index(index: int, seed: int) -> None:
    _default_generator(index).manual_seed(seed)


def manual_seed(seed: int) -> None:
    """Seed the current device's default generator (its home's: the CPU's; on GPU memory
    its GPU's), which its random ops draw from, so they reproduce."""
    _seed_index(current_device(), int(seed))


def manual_seed_all(seed: int) -> None:
    for index in range(device_count()):
        _seed_index(index, int(seed))


def seed() -> None:
    """A random seed for the current device's default generator."""
    _default_generator(current_device()).seed()


def seed_all() -> None:
    for index in range(device_count()):
        _default_generator(index).seed()


def initial_seed() -> int:
    return _default_generator().initial_seed()


def get_rng_state(device="eagerc") -> torch.Tensor:
    """The device's random state, as a CPU uint8 tensor (as torch.cuda's): its default
    generator's, in its home's format (the CPU generator's; on GPU memory its GPU's), so
    that torch.utils.checkpoint's recomputation draws what the forward drew."""
    return _default_generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device="eagerc") -> None:
    generator = _default_generator(_index(device))
    size = generator.get_state().numel()
    if new_state.numel() != size:
        raise RuntimeError(f"set_rng_state: expected a state of {size} bytes for {device}, "
                           f"got {new_state.numel()}")
    generator.set_state(new_state.clone())


# The device's Inductor backend, looked up here by Inductor (torch.compile on "eagerc");
# loaded on first access so that `import eagerc` does not import Inductor.
_INDUCTOR_BACKEND = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name: str):
    # torch.eagerc.default_generators, like torch.cuda.default_generators.
    if name == "default_generators":
        return tuple(_default_generator(i) for i in range(device_count()))
    if name in _INDUCTOR_BACKEND:
        from eagerc.device import inductor_backend

        found = getattr(inductor_backend, name)
        if found is not None:
            return found
    raise AttributeError(f"module 'torch.eagerc' has no attribute {name!r}")
