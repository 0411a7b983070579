"""Targets (eagerc/targets.py): which devices eagerc compiles for, and how it says no."""
from __future__ import annotations

import pickle

import pytest
import torch

import eagerc
from eagerc import codegen, targets


def test_cpu_target_is_direct():
    t = targets.for_device("cpu")
    assert (t.device, t.dispatch_key, t.codegen, t.home, t.host_aliases, t.new_device) == (
        "cpu", "CPU", codegen.CPP, "cpu", False, False)
    assert t.arch() == f"cpu-{torch.backends.cpu.get_cpu_capability()}"


def test_eagerc_device_compiles_for_the_cpu_through_host_aliases():
    t = targets.for_device("eagerc:0")
    assert (t.device, t.dispatch_key, t.codegen, t.home, t.host_aliases, t.new_device) == (
        "eagerc", "PrivateUse1", codegen.CPP, "cpu", True, True)
    assert targets.for_device("privateuseone") is t
    x = torch.randn(3, 4, device="eagerc")
    (standin,) = t.standins((x,))
    assert standin.device.type == "cpu" and standin.shape == x.shape and standin.stride() == x.stride()
    code = "aoti_torch_empty_strided(2, s, st, dt, cached_torch_device_type_cpu, 0, &h);"
    assert "cached_torch_device_type_privateuse1" in t.allocate_outputs(code)
    assert targets.for_device("cpu").allocate_outputs(code) == code


@pytest.mark.parametrize("device,why", [
    ("meta", "Inductor has no backend for 'meta'"),
    pytest.param("cuda", "no CUDA GPU", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="this machine has a GPU: cuda is a target")),
    ("tpu", "torch knows no such device"),
])
def test_device_without_a_target_is_refused_clearly(device, why):
    with pytest.raises(targets.TargetError, match=why) as info:
        eagerc.enable(device)
    message = str(info.value)
    if device == "cuda":  # a known device, only absent here: no advice on adding a target
        assert "Known targets" not in message and "register_backend_for_device" not in message
    else:
        assert "Known targets: cpu, eagerc" in message
        assert "register_backend_for_device" in message  # how to add one
    assert isinstance(info.value, ValueError)


def test_refused_enable_registers_nothing():
    before = eagerc.stats()
    with pytest.raises(targets.TargetError):
        eagerc.enable("meta")
    assert not eagerc._C._is_enabled("Meta")
    assert eagerc.stats()["misses"] == before["misses"]


def test_register_device_refuses_memory_the_host_cannot_address():
    with pytest.raises(targets.TargetError, match="none of eagerc's code generators can address it"):
        targets.register_device("eagerc", host_memory=False)
    assert targets.for_device("eagerc").host_aliases  # unchanged


def test_code_generators_are_the_ones_inductors_registry_names():
    # The home devices' and the eagerc device's code generators, declared without importing
    # Inductor, are the ones their Inductor backends register.
    assert codegen.for_device("cpu") is targets.for_device("cpu").codegen is codegen.CPP
    assert codegen.for_device("eagerc") is targets.for_device("eagerc").codegen
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cuda_combined_scheduling import CUDACombinedScheduling
    from torch._inductor.codegen.triton import TritonScheduling

    class VendorScheduling(CppScheduling):
        pass

    assert codegen.for_scheduling(VendorScheduling) is codegen.CPP
    assert codegen.for_scheduling(TritonScheduling) is codegen.TRITON
    assert codegen.for_scheduling(CUDACombinedScheduling) is codegen.TRITON  # delegates to Triton
    assert codegen.for_scheduling(object) is None
    # The eagerc device on GPU memory registers CUDA's scheduling: the Triton code generator.
    from eagerc.device.inductor_backend import _gpu_scheduling

    assert codegen.for_scheduling(_gpu_scheduling()) is codegen.TRITON
    assert pickle.loads(pickle.dumps(targets.for_device("eagerc"))) == targets.for_device("eagerc")


@pytest.fixture
def inductor_backend_for_hpu():
    """Registers an Inductor backend for "hpu" (a device type torch knows, none here) while
    the test runs."""
    from torch._dynamo import device_interface
    from torch._inductor.codegen import common

    common.init_backend_registration()
    yield common.register_backend_for_device
    common.device_codegens.pop("hpu", None)
    device_interface.device_interfaces.pop("hpu", None)
    targets._targets.pop("hpu", None)


def test_a_backend_without_a_device_interface_or_generating_other_code_is_refused(inductor_backend_for_hpu):
    from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    inductor_backend_for_hpu("hpu", TritonScheduling, PythonWrapperCodegen)
    with pytest.raises(targets.TargetError, match="no C\\+\\+ wrapper codegen"):
        targets.for_device("hpu")
    inductor_backend_for_hpu("hpu", TritonScheduling, PythonWrapperCodegen, CppWrapperGpu)
    with pytest.raises(targets.TargetError, match="no device interface"):
        targets.for_device("hpu")
    register_interface_for_device("hpu", CpuInterface)
    with pytest.raises(targets.TargetError, match="Triton kernels on CUDA memory only"):
        targets.for_device("hpu")
    assert "hpu" not in targets.known_targets()


def test_a_miss_finds_the_target_of_the_device_served_on_its_key(monkeypatch):
    # for_served is what the miss path asks: the same target as for_device(served_device()).
    for key in ("CPU", "PrivateUse1"):
        assert targets.for_served(key) is targets.for_device(targets.served_device(key))
    device = targets.for_device("eagerc")
    monkeypatch.setitem(targets._served, device.dispatch_key, device.device)  # as enable() serves it
    assert targets.for_served(device.dispatch_key) is device
    with pytest.raises(targets.TargetError):
        targets.for_served("NoSuchDispatchKey")
