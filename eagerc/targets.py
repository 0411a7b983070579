"""Targets: which devices eagerc compiles for, and how a device's tensors reach the code.

A device is where tensors live and whose dispatch key receives the call; its target says
which code generator object (eagerc/codegen/: host C++ or Triton) builds its kernels and
how its tensors reach that code. A device whose memory is its code generator's home
memory but which is not the home device itself (the eagerc reference device, a vendor's
host-memory device) is served through stand-ins: its calls are traced on tensors of the
home device with the same metadata, generated kernels run directly on its tensors with
outputs allocated on the device, and home functions the kernels call (extern
convolution) run on zero-copy aliases of its tensors.

How a device gets a target, in order:

1. a code generator's home device: ``cpu`` (host C++), ``cuda`` where torch sees a CUDA
   GPU and Triton is installed (Triton kernels launched from the same C++ wrapper, cubins
   bundled in the artifact), in override mode;
2. a device declared with :func:`register_device` by where its memory lives (what
   ``import eagerc`` does for the eagerc device, without importing Inductor);
3. any other device: the code generator Inductor's registry gives it
   (:func:`eagerc.codegen.for_device`: a scheduling registered with
   ``register_backend_for_device`` or a PrivateUse1 device module's ``Scheduling``, a C++
   wrapper codegen and a device interface). docs/vendor.md walks through it.

Anything else raises :class:`TargetError` naming the known targets and how to add one.

    >>> import eagerc.targets as targets
    >>> t = targets.for_device("cpu")
    >>> (t.device, t.codegen.name, t.home, t.host_aliases)
    ('cpu', 'cpp', 'cpu', False)
    >>> t.arch().startswith("cpu-")
    True
"""
from __future__ import annotations

import dataclasses
import threading

import torch

from eagerc import codegen as codegen_registry
from eagerc.aten_meta import storage_extent
from eagerc.codegen import Codegen

__all__ = ["Target", "TargetError", "for_device", "register_device", "known_targets", "served_device"]


class TargetError(ValueError):
    """eagerc cannot compile for this device; the message names the way forward."""


@dataclasses.dataclass(frozen=True)
class Target:
    """How eagerc compiles for one device.

    Attributes:
        device: the device served ("cpu", "eagerc").
        dispatch_key: where its kernel holders are registered ("CPU", "PrivateUse1").
        codegen: the code generator object (eagerc/codegen/: host C++ or Triton) that
            builds its kernels; its ``home`` is the Inductor device type that code runs on.
        host_aliases: the device's memory is the code generator's home memory (host memory
            for C++, GPU memory for Triton): its kernels may run on zero-copy aliases of
            the device's tensors on the home device.
        new_device: the device has no kernels of its own (an op eagerc cannot compile
            raises instead of falling back to the device's kernel).
    """

    device: str
    dispatch_key: str
    codegen: Codegen = codegen_registry.CPP
    host_aliases: bool = False
    new_device: bool = False

    @property
    def home(self) -> str:
        """The device type whose memory this device's memory is ("cpu", "cuda")."""
        return self.codegen.home

    def arch(self) -> str:
        """What the generated code is specialized to, e.g. 'cpu-avx512' or 'sm_90-cuda13.0'
        (in the cache namespace)."""
        return self.codegen.arch()

    @property
    def native_kernels(self) -> bool:
        """Whether an op eagerc does not turn into generated code can lean on an ATen
        kernel: the device's own, or (aliases on, EAGERC_ALIAS_FALLBACK) its memory home's,
        through aliases or an extern. False for a new device with aliases off, as a
        vendor's accelerator is: such ops are traced with the accelerator decompositions."""
        from eagerc import _config

        return not self.new_device or (self.host_aliases and _config.alias_fallback_enabled())

    def decompositions(self) -> dict:
        """Decompositions used in place of Inductor's when tracing for this target."""
        from eagerc.compile.accelerator.decompositions import for_codegen, for_home_gaps

        own = self.codegen.decompositions()
        if self.native_kernels:
            return {**for_home_gaps(self.home), **own}

        return {**for_codegen(self.codegen), **own}

    def touches_device(self, args) -> bool:
        """Whether the call has tensors (or a device argument) of the served device that
        the code generator must see through stand-ins."""
        if self.device == self.home:
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
        tensors of the home device with the same metadata (tracing reads nothing else)."""
        if self.device == self.home:
            return tuple(args)
        return tuple(self._standin(a) for a in args)

    def home_device(self, device: torch.device) -> torch.device:
        """The home device whose kernels address `device`'s memory: the host for host
        memory, the same index's GPU for GPU memory (eagerc:1 is cuda:1), so a kernel
        traced for it guards, allocates and launches on that GPU."""
        if self.home == "cpu" or device.index is None:
            return torch.device(self.home)
        return torch.device(self.home, device.index)

    def _standin(self, value):
        if isinstance(value, torch.Tensor) and value.device.type == self.device:
            extent = storage_extent(value.shape, value.stride(), value.storage_offset())
            base = torch.empty(max(extent, 1), dtype=value.dtype, device=self.home_device(value.device))
            return base.as_strided(value.shape, value.stride(), value.storage_offset())
        if isinstance(value, torch.device) and value.type == self.device:
            return self.home_device(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self._standin(v) for v in value)
        return value

    def allocate_outputs(self, code: str) -> str:
        """Point the generated wrapper's allocations (outputs and temporaries, through
        ``aoti_torch_empty_strided(..., cached_torch_device_type_<home>, ...)``) at the
        served device, whose memory the generated kernels address directly."""
        if self.device == self.home:
            return code
        shim = "privateuse1" if self.dispatch_key == "PrivateUse1" else self.device
        home = self.home
        return (code.replace(f"CACHE_TORCH_DEVICE({home})", f"CACHE_TORCH_DEVICE({shim})")
                    .replace(f"cached_torch_device_type_{home}", f"cached_torch_device_type_{shim}"))


_lock = threading.Lock()
_targets: dict = {"cpu": Target(device="cpu", dispatch_key="CPU", codegen=codegen_registry.CPP)}


def register_device(device: str, *, host_memory: bool = True, memory: str = "") -> Target:
    """Declare a PrivateUse1 device that eagerc compiles for, by where it keeps its memory.

    ``memory``: whose kernels can address it: "cpu" (host memory: host C++ kernels, the
    default) or "cuda" (GPU memory allocated through PyTorch's CUDA caching allocator:
    Triton kernels, run on its tensors; ops whose wrappers call CUDA's ATen functions run
    on zero-copy CUDA aliases). ``host_memory=False`` without ``memory`` is refused: eagerc
    must be able to address the memory. Nothing is imported from Inductor: this is what
    ``import eagerc`` does for the eagerc device (``EAGERC_BACKING``), whose Inductor
    backend (eagerc/device/inductor_backend.py) registers the same code generator. A
    vendor registers an Inductor backend for its device instead (see the module docstring).

        >>> import eagerc.targets as targets
        >>> targets.for_device("eagerc").host_aliases
        True
    """
    memory = memory or ("cpu" if host_memory else "")
    found = codegen_registry.for_home(memory)
    if found is None:
        kinds = ", ".join(f"{c.name} on {c.home} memory" for c in codegen_registry.ALL)
        raise TargetError(f"{device!r} keeps its memory where none of eagerc's code generators "
                          f"can address it ({kinds}). Register an Inductor backend for it once "
                          "eagerc packages that code generator.")
    # Its kernels are the code generator's: compiled on stand-ins of the memory's home
    # device, run on its own tensors (or on aliases, for ops that call the home's ATen
    # functions).
    target = Target(device=device, dispatch_key=_dispatch_key(device), codegen=found,
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
    target = _home_target(name) or _from_inductor_backend(name)
    with _lock:
        return _targets.setdefault(name, target)


# Dispatch key -> the device enable() serves on it ("PrivateUse1" -> "eagerc").
_served: dict = {}


def serve(target: Target) -> None:
    """Record that `target`'s device is served on its dispatch key (by enable())."""
    with _lock:
        _served[target.dispatch_key] = target.device


def served_device(dispatch_key: str) -> str:
    """The device enabled on `dispatch_key` ("PrivateUse1" -> "eagerc"); the key itself
    when none was."""
    with _lock:
        return _served.get(dispatch_key, dispatch_key)


def for_served(dispatch_key: str) -> Target:
    """for_device(served_device(dispatch_key)), as every miss asks it: two dictionary reads
    once the served device has its target (a read needs no lock; the two calls took 3 µs)."""
    found = _targets.get(_served.get(dispatch_key, dispatch_key))
    return found if found is not None else for_device(served_device(dispatch_key))


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
            "backend for the device (torch._inductor.codegen.common.register_backend_for_device) "
            "and a device interface: a scheduling that generates C++ for host memory "
            "(CppScheduling), or Triton for CUDA memory (TritonScheduling, with CUDA's device op "
            "overrides); docs/vendor.md. For a host-memory PrivateUse1 device, "
            "eagerc.targets.register_device(name) also does.")


def _home_target(name: str):
    """The target of a code generator's own home device (the CPU, CUDA: served in override
    mode, no stand-ins), or None when `name` is no code generator's home."""
    found = codegen_registry.for_home(name)
    if found is None:
        return None
    why = found.unavailable()
    if why:  # a known device, absent here: how to add a target would mislead
        raise TargetError(f"eagerc cannot serve {name!r}: {why}.")
    return Target(device=name, dispatch_key=_dispatch_key(name), codegen=found)


def _from_inductor_backend(name: str) -> Target:
    try:
        torch.device(name)
    except RuntimeError:
        raise TargetError(f"eagerc cannot serve device {name!r}: torch knows no such device. "
                          + _how_to_add()) from None
    try:
        found = codegen_registry.for_device(name)
    except codegen_registry.NoCodegen as e:
        raise TargetError(f"eagerc cannot serve device {name!r}: {e}. " + _how_to_add()) from None
    why = found.refusal_for(name) or found.unavailable()
    if why:
        raise TargetError(f"eagerc cannot serve device {name!r}: {why}. " + _how_to_add())
    # The device's memory is the code generator's home memory (a C++ scheduling addresses
    # its buffers as host pointers, a Triton one its CUDA op overrides' as CUDA device
    # pointers): served through stand-ins and zero-copy aliases.
    key = _dispatch_key(name)
    return Target(device=name, dispatch_key=key, codegen=found, host_aliases=True,
                  new_device=key == "PrivateUse1")
