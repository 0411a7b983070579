"""The eagerc reference device: PrivateUse1 renamed "eagerc", its memory on the host
(default) or, with ``EAGERC_BACKING=cuda`` set before ``import eagerc``, on the GPU: a new
GPU device with no hand-written compute kernels.

Its runtime is hand-written C++ (csrc/device/: allocator, device guard, hooks, default
generator, and the runtime ops: allocation, copies, .item(), set_/resize_, views); every
compute op on it is compiled by eagerc. ``register()`` makes the device usable:

    >>> import torch, eagerc.device
    >>> eagerc.device.register()
    True
    >>> torch.tensor([1, 2, 3]).to("eagerc")[1:].cpu().tolist()
    [2, 3]
"""
from __future__ import annotations

import warnings

import torch

from eagerc.device.naming import NAME

__all__ = ["NAME", "register"]

# What torch calls PrivateUse1 before any backend renames it.
_UNCLAIMED = ("privateuseone", "privateuse1")

_registered = False
_warned = False


def register() -> bool:
    """Register the eagerc device as PrivateUse1; True once it is usable.

    Idempotent. Returns False, with one warning, and registers nothing when another
    backend already owns PrivateUse1: eagerc then still serves that backend's missing
    ops through ``eagerc.enable("<its device>")``.

        >>> import torch, eagerc.device
        >>> eagerc.device.register() and torch.eagerc.device_count()
        1
    """
    global _registered
    if _registered:
        return True
    current = torch._C._get_privateuse1_backend_name()
    if current not in _UNCLAIMED + (NAME,):
        _warn_claimed(current)
        return False
    import _eagerc as _C
    from eagerc import _config

    backing = _config.device_backing()
    if backing == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"{_config.BACKING_ENV}=cuda, but torch sees no CUDA GPU")
        torch.cuda.init()  # the CUDA caching allocator the device allocates through
    _C._device_set_backing(backing)
    if not _C._device_register():
        # Hooks or kernels are registered for PrivateUse1 under the default name.
        _warn_claimed(current)
        return False
    if current != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
    if not hasattr(torch, NAME):
        from eagerc.device import device_module

        torch._register_device_module(NAME, device_module)
    if not hasattr(torch.Tensor, NAME):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    # Its kernels are those of its memory's home: host C++ for host memory, Triton for
    # GPU memory (eagerc/targets.py); its runtime ops alias its tensors onto that device.
    from eagerc import targets

    targets.register_device(NAME, memory=backing)
    _C._set_memory_home(NAME, backing)
    # torch.distributed's collectives on the device: its memory's backend on aliases.
    from eagerc.device import distributed

    distributed.register(backing)
    # module.to(device) keeps tied parameters tied (torch unties them on PrivateUse1).
    from eagerc.device import module_conversion

    module_conversion.install(NAME)
    if backing == "cpu":
        # ATen's CPU fused SGD leaves half-precision parameters unchanged: the device's
        # fused step runs it in float32 (CUDA's fused kernel's math).
        from eagerc.device import fused_sgd

        fused_sgd.install()
    if backing == "cuda":
        # torch.compile of a graph on GPU memory compiles it for CUDA and runs it on
        # aliases (Inductor's Triton path knows only "cuda" devices); wrapped when
        # Inductor is first imported, not now.
        from eagerc.device import compile_on_home

        compile_on_home.install()
    _registered = True
    return True


def _warn_claimed(backend: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"PrivateUse1 already belongs to the {backend!r} backend, so the eagerc reference "
            f"device is not registered. eagerc.enable({backend!r}) still serves that device's "
            "missing ops with compiled kernels.",
            RuntimeWarning,
            stacklevel=3,
        )
