"""mydevice: an example PrivateUse1 device with its own runtime and no compute kernels.

Its memory is host memory; its runtime (allocator, device guard, hooks, and the ops that
allocate, copy, read scalars and make views) is csrc/runtime.cpp, built with
torch.utils.cpp_extension on first import. It registers an Inductor backend that reuses
Inductor's C++ code generator, which is all eagerc needs: ``import mydevice, eagerc``
serves every other ATen op on the device with kernels eagerc compiles.

    >>> import torch, mydevice, eagerc
    >>> x = torch.randn(4, 4).to("mydevice")
    >>> torch.allclose(torch.softmax(x, -1).cpu(), torch.softmax(x.cpu(), -1))
    True
"""
from __future__ import annotations

import torch

NAME = "mydevice"


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() == NAME:
        return  # imported twice (a reload): registered once
    from mydevice import _build, device_module

    torch.utils.rename_privateuse1_backend(NAME)
    _build.extension().register_runtime()
    torch._register_device_module(NAME, device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    from mydevice import inductor_backend

    inductor_backend.register()


_register()
