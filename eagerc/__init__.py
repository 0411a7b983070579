"""eagerc: an eager-mode PyTorch backend whose ATen kernels are compiled by TorchInductor.

Each ATen op that reaches an enabled device is compiled on its first call (C++ on CPUs),
cached on disk, and run from a C++ kernel holder on every later call.

    >>> import torch, eagerc
    >>> served = eagerc.enable("cpu")   # the ops eagerc now serves on the CPU
    >>> "aten::softmax.int" in served or "aten::_softmax" in served
    True
    >>> y = torch.softmax(torch.randn(37, 91), dim=-1)
    >>> counters = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    >>> counters["hits"] + counters["misses"] >= 1
    True
    >>> eagerc.disable("cpu")

``import eagerc`` registers the eagerc device and nothing more: the compiler, the cache
and capture's monitor load on first use (see docs/architecture.md, "Layers"). Where torch
sees a CUDA GPU it does so only with ``EAGERC_BACKING=cuda`` or ``EAGERC_DEVICE=1``: the
device would become torch's accelerator, which breaks CUDA autograd (eagerc/_config.py).
"""
import sys

import torch  # noqa: F401  (loads libtorch before _eagerc)

# The C++ runtime is the top-level extension module _eagerc (CMakeLists.txt says why):
# eagerc's own modules import it directly, users and tools name it eagerc._C.
import _eagerc as _C
from eagerc._version import __version__
from eagerc.capture import capture, capture_stats
from eagerc.per_op.registration import disable, enable, enabled, reset_stats, stats

# `import eagerc._C` and `from eagerc import _C` find this same module: loaded once.
sys.modules["eagerc._C"] = _C


def _register_device() -> None:
    """`import eagerc` makes the eagerc device usable: its hand-written runtime is
    registered, and every other op on it is served by compiled kernels (registering
    takes milliseconds; nothing compiles until an op runs). Where another backend owns
    PrivateUse1 already (a vendor's device, which `import torch` loads through its
    `torch.backends` entry point before this runs), eagerc serves that device instead, if
    Inductor's registry gives it a code generator (docs/vendor.md)."""
    from eagerc import _config, device

    vendor = _config.vendor_device()
    if vendor is not None:
        _serve_vendor_device(vendor)
    elif _config.register_device_at_import() and device.register():
        enable(device.NAME)


def _serve_vendor_device(name: str) -> None:
    import warnings

    from eagerc.targets import TargetError

    try:
        enable(name)
    except TargetError as e:
        warnings.warn(f"eagerc does not serve the PrivateUse1 device {name!r}: {e}", RuntimeWarning,
                      stacklevel=3)


_register_device()


def wait_compiles(timeout=None) -> bool:
    """Block until the compile service has finished every kernel this process's misses
    sent it (background mode, the default), or `timeout` seconds pass (then False). Each
    kernel is loaded at its signature's next call."""
    from eagerc.per_op.background import jobs

    return jobs().wait(timeout)


def warm_cache(model, *example_inputs, device=None, train=False, workers=None, optimizer=None,
               confirm=False, cluster=None):
    """Compile every kernel `model(*example_inputs)` needs on `device` ahead of time, in
    parallel worker processes (or, with `cluster="auto"` / `"ray://..."`, as tasks of a Ray
    cluster), without running the model (fake tensors); returns a WarmReport. Afterwards
    the model's first real run compiles nothing. See eagerc/warm/__init__.py."""
    from eagerc.warm import warm_cache as warm

    return warm(model, *example_inputs, device=device, train=train, workers=workers,
                optimizer=optimizer, confirm=confirm, cluster=cluster)

__all__ = [
    "enable",
    "disable",
    "enabled",
    "stats",
    "reset_stats",
    "warm_cache",
    "wait_compiles",
    "capture",
    "capture_stats",
    "__version__",
]
