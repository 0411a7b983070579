"""mygpu: an example PrivateUse1 device whose memory is CUDA memory, with its own runtime and
no compute kernels.

Its memory is CUDA memory from an allocator of its own (cudaMalloc/cudaFree), device N's on
cuda:N; its runtime (allocator, device guard over CUDA's devices and streams, hooks, and the
ops that allocate, copy, read scalars and make views) is csrc/runtime.cpp, built with
torch.utils.cpp_extension on first import. It registers an Inductor backend that is
Inductor's Triton code generator with CUDA's C++ wrapper and CUDA's device op overrides,
which is all eagerc needs: eagerc serves every other ATen op on the device with Triton
kernels it compiles.

Installed, the package is a device backend torch loads itself: its ``torch.backends`` entry
point (pyproject.toml) names :func:`_autoload`, which ``import torch`` calls (unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``), so the device is registered before any code looks at
PrivateUse1, and eagerc serves it whatever is imported next:

    >>> import torch
    >>> x = torch.randn(4, 4).to("mygpu")
    >>> torch.allclose(torch.softmax(x, -1).cpu(), torch.softmax(x.cpu(), -1))
    True

Not installed (only on ``sys.path``), ``import mygpu, eagerc`` does the same, in that order.
With a torch built without CUDA nothing is registered (a warning says so).
"""
from __future__ import annotations

import warnings

import torch

NAME = "mygpu"


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() == NAME:
        return  # imported twice (a reload): registered once
    if torch.version.cuda is None:
        warnings.warn("mygpu is not registered: its memory is CUDA memory, and this torch is a "
                      "build without CUDA", RuntimeWarning, stacklevel=3)
        return
    from mygpu import _build, device_module

    torch.utils.rename_privateuse1_backend(NAME)
    _build.extension().register_runtime()
    torch._register_device_module(NAME, device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    from mygpu import inductor_backend

    inductor_backend.register()


_register()


def _autoload() -> None:
    """``torch.backends`` entry point, called by ``import torch`` once this package is
    imported (which registered the device): eagerc serves it from then on. Inside a running
    ``import eagerc`` (eagerc imports torch first) this finds eagerc partly imported and
    leaves the serving to it."""
    import eagerc  # noqa: F401  (its import serves the PrivateUse1 device registered above)
