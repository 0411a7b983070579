"""mydevice's Inductor backend: Inductor's own C++ code generator, because the device's
memory is host memory (a C++ kernel addresses its buffers as host pointers), and the
host's device interface (properties, synchronize). This registration is what eagerc reads
to choose its code generator for the device (eagerc.codegen.for_device)."""
from __future__ import annotations

from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

from mydevice import NAME


class Scheduling(CppScheduling):
    """Inductor's C++ scheduling, unchanged: mydevice memory is host memory."""


def register() -> None:
    register_backend_for_device(NAME, Scheduling, PythonWrapperCodegen, CppWrapperCpu)
    register_interface_for_device(NAME, CpuInterface)
    register_device_op_overrides(NAME, CpuDeviceOpOverrides())
