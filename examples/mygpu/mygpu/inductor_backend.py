"""mygpu's Inductor backend: Inductor's Triton code generator, CUDA's C++ wrapper and CUDA's
device op overrides (CUDA streams, device guards, the CUDA driver's kernel loads and
launches), because the device's memory is CUDA memory (a Triton kernel addresses its
buffers as CUDA device pointers), and CUDA's device interface, answering for the GPU that
holds the device's memory. This registration is what eagerc reads to choose its code
generator for the device and to know that its memory is CUDA memory
(eagerc.codegen.for_device, the Triton code generator's refusal_for)."""
from __future__ import annotations

import torch
from torch._dynamo.device_interface import CudaInterface, register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu
from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides
from torch._inductor.codegen.triton import TritonScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

from mygpu import NAME


class Scheduling(TritonScheduling):
    """Inductor's Triton scheduling, unchanged: mygpu memory is CUDA memory."""


def _on_cuda(device):
    """`device` as the CUDA device holding its memory (mygpu:N is cuda:N); others as given."""
    if device is None or isinstance(device, int):
        return device
    device = torch.device(device)
    return torch.device("cuda", device.index or 0) if device.type == NAME else device


class Interface(CudaInterface):
    """CUDA's device interface (current device, streams, synchronize: the current GPU's);
    what is asked about a mygpu device is answered for its GPU."""

    class Worker(CudaInterface.Worker):
        @staticmethod
        def get_device_properties(device=None):
            return CudaInterface.Worker.get_device_properties(_on_cuda(device))

    @staticmethod
    def get_device_properties(device=None):
        return torch.cuda.get_device_properties(_on_cuda(device))

    @staticmethod
    def get_compute_capability(device=None):
        return CudaInterface.get_compute_capability(_on_cuda(device))


def register() -> None:
    register_backend_for_device(NAME, Scheduling, PythonWrapperCodegen, CppWrapperGpu)
    register_interface_for_device(NAME, Interface)
    register_device_op_overrides(NAME, CUDADeviceOpOverrides())
