"""The eagerc device's Inductor backend: what makes ``torch.compile`` work on "eagerc", and
what tells eagerc's per-op compiler which code generator serves the device.

Inductor finds a PrivateUse1 device's backend on its device module (``torch.eagerc.
Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen``, ``WrapperFxCodegen``), which
hands out the classes below on first access; this module is imported only then, so
``import eagerc`` never imports Inductor. eagerc's per-op compiler reads the same
registration (eagerc.codegen.for_device): the device is one client of the path a vendor's
device takes (docs/vendor.md).

On host memory (the default) Inductor's CPU code generator serves the device as is: its
C++ kernels address eagerc buffers directly, the Python wrapper allocates them on the
device (``empty_strided(..., device='eagerc')``), and extern calls (``mm``) dispatch to the
device's own kernels. Two places in Inductor test ``device.type == "cpu"`` where they mean
"host C++ code"; both are widened to this device here, and only here:

- the wrapper's kernel call (``_generate_kernel_call_helper``): a C++ kernel is called the
  CPU way (an override in :class:`PythonWrapperCodegen`);
- the scheduler's ``BaseSchedulerNode.is_cpu`` (fusion decisions that assume GPU-style
  tiling otherwise): extended to the devices in :data:`HOST_CPP_DEVICES`.

On GPU memory (``EAGERC_BACKING=cuda``) the device's backend is CUDA's (Triton kernels,
its C++ wrapper, its device interface and helpers): eagerc's per-op compiler reads it as
the Triton code generator. torch.compile on the device over GPU memory is checked only on
a GPU machine.

Re-check both for each torch release (2.11 to 2.14), as for eagerc/compile/inductor_wrapper.py.
"""
from __future__ import annotations

import torch
from torch._inductor.codegen import wrapper as _wrapper
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

from eagerc import _config
from eagerc.device import NAME

# Devices whose Inductor code is host C++ although their type is not "cpu".
HOST_CPP_DEVICES = {"cpu", NAME}


class HostScheduling(CppScheduling):
    """Inductor's C++ scheduling: eagerc memory is host memory."""


def _gpu_scheduling():
    from torch._inductor.codegen.cuda_combined_scheduling import CUDACombinedScheduling

    class GpuScheduling(CUDACombinedScheduling):
        """CUDA's scheduling (Triton kernels): eagerc memory is GPU memory."""

    return GpuScheduling


class HostPythonWrapperCodegen(_wrapper.PythonWrapperCodegen):
    """Inductor's Python wrapper; C++ kernels on the eagerc device are called as on the CPU."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return _wrapper.SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return HostPythonWrapperCodegen()

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        from torch._inductor.virtualized import V

        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type in HOST_CPP_DEVICES:
            device = torch.device("cpu")
        return super()._generate_kernel_call_helper(kernel_name, call_args, device=device,
                                                    triton=triton, **kwargs)


# The backend of the device's memory (EAGERC_BACKING, read when the device registered).
_ON_GPU_MEMORY = _config.device_backing() != "cpu"
if _ON_GPU_MEMORY:
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu as CppWrapperCodegen

    Scheduling = _gpu_scheduling()
    PythonWrapperCodegen = _wrapper.PythonWrapperCodegen
else:
    Scheduling = HostScheduling
    PythonWrapperCodegen = HostPythonWrapperCodegen
    CppWrapperCodegen = CppWrapperCpu

try:  # torch >= 2.12 asks device modules for an FX wrapper as well
    from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen
except ImportError:  # pragma: no cover - older torch
    WrapperFxCodegen = None


def _register() -> None:
    from torch._dynamo.device_interface import CpuInterface, CudaInterface, register_interface_for_device
    from torch._inductor import scheduler
    from torch._inductor.codegen.common import register_device_op_overrides

    if _ON_GPU_MEMORY:
        from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

        register_interface_for_device(NAME, CudaInterface)  # streams, synchronize: CUDA device 0's
        register_device_op_overrides(NAME, CUDADeviceOpOverrides())
        return
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    register_interface_for_device(NAME, CpuInterface)  # device properties, synchronize: the host's
    register_device_op_overrides(NAME, CpuDeviceOpOverrides())
    node = scheduler.BaseSchedulerNode
    if not getattr(node.is_cpu, "_eagerc", False):
        def is_cpu(self) -> bool:
            device = self.get_device()
            return device is not None and device.type in HOST_CPP_DEVICES

        is_cpu._eagerc = True
        node.is_cpu = is_cpu


_register()
