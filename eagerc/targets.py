"""Targets: what Inductor generates code for, and how a device's tensors reach that code.

A device is where tensors live and whose dispatch key receives the call; a target is the
code generator eagerc compiles for. Usually they coincide (``cpu``). A device whose memory
is host memory (the eagerc reference device, or a vendor's device whose Inductor backend
generates host C++) has the CPU as its code generator: its calls are traced on CPU
stand-ins, generated kernels run directly on its tensors with outputs allocated on the
device, and CPU functions the kernels call (extern mm, convolution) run on zero-copy CPU
aliases of its tensors.

How a device gets a target, in order:

1. ``cpu`` is built in; ``cuda`` too where torch sees a CUDA GPU and Triton is installed
   (Triton kernels launched from the same C++ wrapper, cubins bundled in the artifact);
2. a device declared with :func:`register_device` (what ``import eagerc`` does for the
   eagerc device, without importing Inductor);
3. the general rule: a device with an Inductor backend
   (``torch._inductor.codegen.common.register_backend_for_device``, or a PrivateUse1
   device module exposing ``Scheduling`` / ``PythonWrapperCodegen`` /
   ``CppWrapperCodegen``) whose scheduling generates C++ (``CppScheduling``).

Anything else raises :class:`TargetError` naming the known targets and how to add one.

    >>> import eagerc.targets as targets
    >>> t = targets.for_device("cpu")
    >>> (t.device, t.codegen, t.host_aliases)
    ('cpu', 'cpu', False)
    >>> t.arch().startswith("cpu-")
    True
"""
from __future__ import annotations

import dataclasses
import os
import threading

import torch

from eagerc.aten_meta import storage_extent

__all__ = ["Target", "TargetError", "for_device", "register_device", "known_targets"]

# Code generators eagerc can package as artifacts (an Inductor device type each).
CODEGENS = ("cpu", "cuda")


class TargetError(ValueError):
    """eagerc cannot compile for this device; the message names the way forward."""


@dataclasses.dataclass(frozen=True)
class Target:
    """How eagerc compiles for one device.

    Attributes:
        device: the device served ("cpu", "eagerc").
        dispatch_key: where its kernel holders are registered ("CPU", "PrivateUse1").
        codegen: the Inductor device type kernels are generated for ("cpu": C++,
            "cuda": Triton kernels launched from C++).
        host_aliases: the device's memory is the code generator's device memory (host
            memory for "cpu", GPU memory for "cuda"): its kernels may run on zero-copy
            aliases of the device's tensors on the code generator's device.
        new_device: the device has no kernels of its own (an op eagerc cannot compile
            raises instead of falling back to the device's kernel).
    """

    device: str
    dispatch_key: str
    codegen: str = "cpu"
    host_aliases: bool = False
    new_device: bool = False

    def arch(self) -> str:
        """What the generated code is specialized to, e.g. 'cpu-avx512' or 'sm_90-cuda13.0'
        (in the cache namespace)."""
        from kernel_cache.environment import cpu_arch, cuda_arch

        return cuda_arch() if self.codegen == "cuda" else cpu_arch()

    def compiler_settings(self) -> dict:
        """Named settings of this code generator that change its code (for the cache key)."""
        from eagerc.compile import settings

        found = {"cxx": settings.cxx_compiler()}
        if self.codegen == "cuda":
            import triton

            found["triton"] = triton.__version__
            found["gpu_build"] = settings.GPU_BUILD_RECIPE
        return found

    @property
    def aliases_first(self) -> bool:
        """Every call runs on aliases of the memory's home device. No target does so by
        default: a device runs generated kernels on its own tensors and moves an op to
        aliases only when its wrapper calls the home's ATen functions (home_shims.py).
        EAGERC_ALIASES_FIRST=1 restores session 9's GPU-memory behaviour (every call on
        CUDA aliases), to compare the two."""
        return self.host_aliases and self.codegen != "cpu" and os.environ.get(
            "EAGERC_ALIASES_FIRST", "0") == "1"

    def touches_device(self, args) -> bool:
        """Whether the call has tensors (or a device argument) of the served device that
        the code generator must see through stand-ins."""
        if self.device == self.codegen:
            return False
        for a in args:
            for v in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(v, torch.Tensor) and v.device.type == self.device:
                    return True
                if isinstance(v, torch.device) and v.type == self.device:
                    return True
        return False

    def standins(self, args) -> tuple:
        """The call as the code generator sees it: tensors of the served device replaced by
        tensors of the codegen device with the same metadata (tracing reads nothing else)."""
        if self.device == self.codegen:
            return tuple(args)
        return tuple(self._standin(a) for a in args)

    def _standin(self, value):
        if isinstance(value, torch.Tensor) and value.device.type == self.device:
            extent = storage_extent(value.shape, value.stride(), value.storage_offset())
            base = torch.empty(max(extent, 1), dtype=value.dtype, device=self.codegen)
            return base.as_strided(value.shape, value.stride(), value.storage_offset())
        if isinstance(value, torch.device) and value.type == self.device:
            return torch.device(self.codegen)
        if isinstance(value, (list, tuple)):
            return type(value)(self._standin(v) for v in value)
        return value

    def allocate_outputs(self, code: str) -> str:
        """Point the generated wrapper's allocations (outputs and temporaries, through
        ``aoti_torch_empty_strided(..., cached_torch_device_type_<codegen>, ...)``) at the
        served device, whose memory the generated kernels address directly (host C++ for
        host memory, Triton for GPU memory)."""
        if self.device == self.codegen:
            return code
        shim = "privateuse1" if self.dispatch_key == "PrivateUse1" else self.device
        home = self.codegen
        return (code.replace(f"CACHE_TORCH_DEVICE({home})", f"CACHE_TORCH_DEVICE({shim})")
                    .replace(f"cached_torch_device_type_{home}", f"cached_torch_device_type_{shim}"))


_lock = threading.Lock()
_targets: dict = {"cpu": Target(device="cpu", dispatch_key="CPU")}


def register_device(device: str, *, host_memory: bool = True, memory: str = "") -> Target:
    """Declare a PrivateUse1 device that eagerc compiles for.

    ``memory``: where the device keeps its memory, i.e. whose kernels can address it:
    "cpu" (host memory: host C++ kernels, the default) or "cuda" (GPU memory allocated
    through PyTorch's CUDA caching allocator: Triton kernels, run on its tensors; ops
    whose wrappers call CUDA's ATen functions run on zero-copy CUDA aliases).
    ``host_memory=False`` without ``memory`` is refused: eagerc
    must be able to address the memory. This is what ``import eagerc`` does for the eagerc
    device (``EAGERC_BACKING``); a vendor may instead register an Inductor backend for its
    device (see the module docstring).

        >>> import eagerc.targets as targets
        >>> targets.for_device("eagerc").host_aliases
        True
    """
    memory = memory or ("cpu" if host_memory else "")
    if memory not in ("cpu", "cuda"):
        raise TargetError(f"eagerc compiles host C++ and CUDA kernels only; {device!r} keeps its "
                          "memory elsewhere. Register an Inductor backend for it once eagerc "
                          "packages that code generator.")
    # Its kernels are the memory's home device's: compiled for it on stand-ins, run on its
    # own tensors (or on aliases, for ops that call the home's ATen functions).
    target = Target(device=device, dispatch_key=_dispatch_key(device), codegen=memory,
                    host_aliases=True, new_device=True)
    with _lock:
        _targets[device] = target
    return target


def known_targets() -> list:
    """The devices that have a target now, e.g. ['cpu', 'eagerc']."""
    with _lock:
        return sorted(_targets)


def for_device(device) -> Target:
    """The target of `device` ("cpu", "eagerc", "eagerc:0", a torch.device); raises
    TargetError when eagerc cannot compile for it."""
    name = _device_type(device)
    with _lock:
        found = _targets.get(name)
    if found is not None:
        return found
    target = _from_inductor_backend(name)
    with _lock:
        return _targets.setdefault(name, target)


def _device_type(device) -> str:
    name = str(device).split(":")[0].strip().lower()
    if name in ("privateuse1", "privateuseone"):
        return torch._C._get_privateuse1_backend_name()
    return name


def _dispatch_key(device: str) -> str:
    if device == torch._C._get_privateuse1_backend_name():
        return "PrivateUse1"
    return torch._C._dispatch_key_for_device(device)


def _how_to_add() -> str:
    return (f"Known targets: {', '.join(known_targets())}. To add one, register an Inductor "
            "backend for the device whose scheduling generates C++ (torch._inductor.codegen."
            "common.register_backend_for_device(device, CppScheduling-subclass, ...)), or, for "
            "a host-memory PrivateUse1 device, call eagerc.targets.register_device(name).")


def _cuda_target() -> Target:
    """CUDA: Inductor's Triton kernels, launched by its C++ wrapper on the current stream of
    the tensors' device (the device index is part of every signature)."""
    if not torch.cuda.is_available():
        raise TargetError("eagerc cannot serve 'cuda': torch sees no CUDA GPU here. " + _how_to_add())
    from torch.utils._triton import has_triton

    if not has_triton():
        raise TargetError("eagerc compiles CUDA kernels with Triton, which is not installed "
                          "(pip install triton). " + _how_to_add())
    return Target(device="cuda", dispatch_key="CUDA", codegen="cuda")


def _from_inductor_backend(name: str) -> Target:
    if name == "cuda":
        return _cuda_target()
    try:
        torch.device(name)
    except RuntimeError:
        raise TargetError(f"eagerc cannot serve device {name!r}: torch knows no such device. "
                          + _how_to_add()) from None
    from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

    init_backend_registration()
    scheduling = get_scheduling_for_device(name)
    if scheduling is None:
        raise TargetError(f"eagerc cannot serve device {name!r}: Inductor has no backend for it, "
                          "so there is nothing to compile its kernels with. " + _how_to_add())
    from torch._inductor.codegen.cpp import CppScheduling

    if not (isinstance(scheduling, type) and issubclass(scheduling, CppScheduling)):
        raise TargetError(
            f"eagerc cannot serve device {name!r} yet: Inductor's backend for it does not "
            f"generate C++, and eagerc packages host C++ and CUDA Triton kernels "
            f"({', '.join(CODEGENS)}) as artifacts. " + _how_to_add())
    # A C++ scheduling addresses the device's buffers as host pointers: its memory is host
    # memory, so the CPU target serves it through stand-ins and zero-copy aliases.
    key = _dispatch_key(name)
    return Target(device=name, dispatch_key=key, codegen="cpu", host_aliases=True,
                  new_device=key == "PrivateUse1")
