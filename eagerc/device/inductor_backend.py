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
"host C++ code", and one answers for every device type it does not name as for CUDA; all
three are widened to this device here, and only here:

- the wrapper's kernel call (``_generate_kernel_call_helper``): a C++ kernel is called the
  CPU way (an override in :class:`PythonWrapperCodegen`);
- the scheduler's ``BaseSchedulerNode.is_cpu`` (fusion decisions that assume GPU-style
  tiling otherwise): extended to the devices in :data:`HOST_CPP_DEVICES`;
- ``torch._inductor.utils.get_current_backend`` (which code a kernel's ops are typed for):
  it answered ``config.cuda_backend`` ("triton") on the device, so the C++ kernel's ops
  took Triton's dtype rules, and a float16/bfloat16 ``masked`` load left a variable without
  a dtype (Inductor's ``assert scalar_var.dtype is not None``: torch.compile of a half
  Conv2d or training step failed with an AssertionError without a message).

On GPU memory (``EAGERC_BACKING=cuda``) the device's backend is CUDA's (Triton kernels,
its C++ wrapper, its device interface and helpers): eagerc's per-op compiler reads it as
the Triton code generator, and compiles on CUDA stand-ins of the device's tensors, so it
never instantiates these classes. torch.compile takes the same road: Inductor's Triton
path takes a graph's device type for the GPU's (``torch.cuda.get_device_properties``,
Triton's target name, ``torch.cuda`` guards and streams in the Python wrapper), so
eagerc.device.compile_on_home hands Inductor each graph re-traced on CUDA and runs the
result on aliases. A graph on "eagerc" that still reaches Inductor's scheduler (a caller
that replaced the inner compile) is refused with :class:`CompileOnGpuMemoryError`; the
device interface answers for the GPU that holds the device's memory.

Re-check both for each torch release (2.11 to 2.14), as for eagerc/compile/inductor_wrapper.py.
"""
from __future__ import annotations

import torch
from torch._inductor.codegen import wrapper as _wrapper
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

from eagerc import _config
from eagerc.device.naming import NAME

# Devices whose Inductor code is host C++ although their type is not "cpu".
HOST_CPP_DEVICES = {"cpu", NAME}


class HostScheduling(CppScheduling):
    """Inductor's C++ scheduling: eagerc memory is host memory."""


class CompileOnGpuMemoryError(NotImplementedError):
    """A graph on the eagerc device with GPU memory reached Inductor's scheduler itself."""

    def __init__(self, device=NAME):
        super().__init__(
            f"Inductor was asked to lower a graph on {str(device)!r} itself: the eagerc "
            "device's memory is GPU memory (EAGERC_BACKING=cuda), and Inductor's Triton code "
            "generator compiles only for 'cuda' devices. torch.compile's own backend "
            "('inductor') compiles such graphs for CUDA and runs them on aliases "
            "(eagerc.device.compile_on_home); a backend that calls Inductor with an inner "
            "compile of its own bypasses that.")


def _gpu_scheduling():
    from torch._inductor.codegen.cuda_combined_scheduling import CUDACombinedScheduling

    class GpuScheduling(CUDACombinedScheduling):
        """CUDA's scheduling (Triton kernels): eagerc memory is GPU memory. Read by eagerc's
        per-op compiler (eagerc.codegen.for_device); never made for a graph on the device,
        which is compiled for CUDA (eagerc.device.compile_on_home)."""

        def __init__(self, scheduler=None):
            raise CompileOnGpuMemoryError()

    return GpuScheduling


def _gpu_interface():
    from torch._dynamo.device_interface import CudaInterface

    def on_cuda(device):
        if device is not None and not isinstance(device, int) and torch.device(device).type == NAME:
            return torch.device("cuda", torch.device(device).index or 0)
        return device

    class GpuMemoryInterface(CudaInterface):
        """CUDA's device interface (streams, synchronize: the current GPU's); what is asked
        about an eagerc device is answered for the GPU that holds its memory."""

        class Worker(CudaInterface.Worker):
            @staticmethod
            def get_device_properties(device=None):
                return CudaInterface.Worker.get_device_properties(on_cuda(device))

        @staticmethod
        def get_device_properties(device=None):
            return torch.cuda.get_device_properties(on_cuda(device))

        @staticmethod
        def get_compute_capability(device=None):
            return CudaInterface.get_compute_capability(on_cuda(device))

    return GpuMemoryInterface


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
    from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
    from torch._inductor import scheduler
    from torch._inductor.codegen.common import register_device_op_overrides

    if _ON_GPU_MEMORY:
        from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

        register_interface_for_device(NAME, _gpu_interface())
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
    _widen_current_backend()


def _widen_current_backend() -> None:
    """Inductor's get_current_backend answers the CPU's backend for the host C++ devices;
    the modules that imported it by name get the widened function too."""
    import importlib

    from torch._inductor import config, utils

    current = utils.get_current_backend
    if getattr(current, "_eagerc", False):
        return

    def get_current_backend(device_type=None):
        from torch._inductor.virtualized import V

        device_type = device_type or V.graph.get_current_device_or_throw().type
        return config.cpu_backend if device_type in HOST_CPP_DEVICES else current(device_type)

    get_current_backend._eagerc = True
    utils.get_current_backend = get_current_backend
    for name in ("torch._inductor.codegen.common", "torch._inductor.scheduler",
                 "torch._inductor.kernel.mm_common"):
        module = importlib.import_module(name)
        if getattr(module, "get_current_backend", None) is current:
            module.get_current_backend = get_current_backend


_register()
