"""Code generators eagerc packages as artifacts, one object per kind, found through
Inductor's own device registry.

- :data:`~eagerc.codegen.cpp.generator.CPP`: host C++ (Inductor's ``CppScheduling``);
- :data:`~eagerc.codegen.triton.generator.TRITON`: Triton kernels on CUDA memory (``TritonScheduling``,
  or a combined scheduling that delegates to it).

A device gets one through what it registered with Inductor
(``torch._inductor.codegen.common.register_backend_for_device``, or a PrivateUse1 device
module's ``Scheduling`` / ``PythonWrapperCodegen`` / ``CppWrapperCodegen``, plus a device
interface, ``torch._dynamo.device_interface.register_interface_for_device``):
:func:`for_device` asks each code generator whether the scheduling Inductor builds for the
device is its own. Nothing here tests a device's name.

    >>> from eagerc import codegen
    >>> codegen.for_device("cpu") is codegen.CPP
    True
    >>> codegen.for_home("cpu").name
    'cpp'
"""
from __future__ import annotations

from eagerc.codegen.base import Codegen
from eagerc.codegen.cpp.generator import CPP
from eagerc.codegen.triton.generator import TRITON

__all__ = ["Codegen", "CPP", "TRITON", "ALL", "NoCodegen", "by_name", "for_home", "for_device", "naming_calls"]

ALL = (CPP, TRITON)


class NoCodegen(LookupError):
    """Inductor's registry gives eagerc no code generator for a device; the message says why."""


def by_name(name: str) -> Codegen:
    """The code generator called `name` ("cpp", "triton")."""
    for found in ALL:
        if found.name == name:
            return found
    raise KeyError(f"no eagerc code generator {name!r}; there are {[c.name for c in ALL]}")


def naming_calls(library: bytes) -> bytes:
    """The bytes of an artifact (`library`) that name the functions it calls: where a code
    generator's artifacts keep them apart (Codegen.naming_calls), that part, else all."""
    for found in ALL:
        part = found.naming_calls(library)
        if part is not None:
            return part
    return library


def for_home(device_type: str) -> Codegen | None:
    """The code generator whose code runs on `device_type`'s memory ("cpu", "cuda"): what a
    device that declares where its memory lives (eagerc.targets.register_device) gets
    without asking Inductor. None where eagerc has none."""
    return next((c for c in ALL if c.home == device_type), None)


def for_scheduling(scheduling) -> Codegen | None:
    """The code generator of an Inductor scheduling as registered for a device: a class,
    or a constructor (Inductor registers the CPU's and CUDA's as functions that read its
    config); either is built with no scheduler, as Inductor does to ask a backend for its
    features. None where the scheduling is none of eagerc's kinds."""
    try:
        built = scheduling(None)
    except Exception:  # noqa: BLE001 - one that needs a scheduler: judged by its class
        built = scheduling
    for found in ALL:
        if found.claims(built):
            return found
    return None


def for_device(device: str) -> Codegen:
    """The code generator for `device` (a device type) from Inductor's registry; raises
    NoCodegen saying what is missing: an Inductor backend (scheduling and C++ wrapper
    codegen), a device interface, or a kind of code eagerc packages."""
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import (get_scheduling_for_device, get_wrapper_codegen_for_device,
                                                init_backend_registration)

    init_backend_registration()
    scheduling = get_scheduling_for_device(device)
    if scheduling is None:
        raise NoCodegen(f"Inductor has no backend for {device!r}, so there is nothing to compile "
                        "its kernels with")
    if get_wrapper_codegen_for_device(device, cpp_wrapper=True) is None:
        raise NoCodegen(f"Inductor's backend for {device!r} has no C++ wrapper codegen "
                        "(register_backend_for_device's device_cpp_wrapper_codegen), which is what "
                        "eagerc builds its artifacts from")
    try:
        get_interface_for_device(device)
    except NotImplementedError:
        raise NoCodegen(f"{device!r} has no device interface for Inductor "
                        "(torch._dynamo.device_interface.register_interface_for_device)") from None
    found = for_scheduling(scheduling)
    if found is None:
        raise NoCodegen(f"Inductor's backend for {device!r} ({getattr(scheduling, '__name__', scheduling)}) "
                        f"generates code eagerc does not package; it packages "
                        f"{', '.join(c.name for c in ALL)} (Inductor's CppScheduling, TritonScheduling)")
    return found
