"""mydevice: an example PrivateUse1 device with its own runtime and no compute kernels.

Its memory is host memory; its runtime (allocator, device guard, hooks, and the ops that
allocate, copy, read scalars and make views) is csrc/runtime.cpp, built with
torch.utils.cpp_extension on first import. It registers an Inductor backend that reuses
Inductor's C++ code generator, which is all eagerc needs: eagerc serves every other ATen op
on the device with kernels it compiles.

Installed, the package is a device backend torch loads itself: its ``torch.backends`` entry
point (pyproject.toml) names :func:`_autoload`, which ``import torch`` calls (unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) after importing this package, so the device is
registered before any code, eagerc included, looks at PrivateUse1, and eagerc serves it;
the order of later imports does not matter:

    >>> import torch
    >>> x = torch.randn(4, 4).to("mydevice")
    >>> torch.allclose(torch.softmax(x, -1).cpu(), torch.softmax(x.cpu(), -1))
    True

Not installed (only on ``sys.path``), ``import mydevice, eagerc`` does the same, in that
order: eagerc imported first would take PrivateUse1 for its own device.
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


def _autoload() -> None:
    """``torch.backends`` entry point, called by ``import torch`` once this package is
    imported (which registered the device): eagerc serves it from then on. Inside a running
    ``import eagerc`` (eagerc imports torch first) this finds eagerc partly imported and
    leaves the serving to it."""
    import eagerc  # noqa: F401  (its import serves the PrivateUse1 device registered above)
