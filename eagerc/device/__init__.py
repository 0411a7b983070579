"""The eagerc reference device: PrivateUse1 renamed "eagerc", its memory on the host.

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

__all__ = ["NAME", "register"]

NAME = "eagerc"
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
    from eagerc import _C

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
    # Its memory is host memory: eagerc compiles for the CPU target (eagerc/targets.py).
    from eagerc import targets

    targets.register_device(NAME, host_memory=True)
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
