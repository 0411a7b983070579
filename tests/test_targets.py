"""Targets (eagerc/targets.py): which devices eagerc compiles for, and how it says no."""
from __future__ import annotations

import pytest
import torch

import eagerc
from eagerc import targets


def test_cpu_target_is_direct():
    t = targets.for_device("cpu")
    assert (t.device, t.dispatch_key, t.codegen, t.host_aliases, t.new_device) == ("cpu", "CPU", "cpu", False, False)
    assert t.arch() == f"cpu-{torch.backends.cpu.get_cpu_capability()}"


def test_eagerc_device_compiles_for_the_cpu_through_host_aliases():
    t = targets.for_device("eagerc:0")
    assert (t.device, t.dispatch_key, t.codegen, t.host_aliases, t.new_device) == (
        "eagerc", "PrivateUse1", "cpu", True, True)
    assert targets.for_device("privateuseone") is t
    x = torch.randn(3, 4, device="eagerc")
    (standin,) = t.standins((x,))
    assert standin.device.type == "cpu" and standin.shape == x.shape and standin.stride() == x.stride()
    code = "aoti_torch_empty_strided(2, s, st, dt, cached_torch_device_type_cpu, 0, &h);"
    assert "cached_torch_device_type_privateuse1" in t.allocate_outputs(code)
    assert targets.for_device("cpu").allocate_outputs(code) == code


@pytest.mark.parametrize("device,why", [
    ("meta", "Inductor has no backend for it"),
    pytest.param("cuda", "no CUDA GPU", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="this machine has a GPU: cuda is a target")),
    ("tpu", "torch knows no such device"),
])
def test_device_without_a_target_is_refused_clearly(device, why):
    with pytest.raises(targets.TargetError, match=why) as info:
        eagerc.enable(device)
    message = str(info.value)
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
    with pytest.raises(targets.TargetError, match="host C\\+\\+"):
        targets.register_device("eagerc", host_memory=False)
    assert targets.for_device("eagerc").host_aliases  # unchanged
