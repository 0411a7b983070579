"""Which generated wrappers can run on a device's own tensors, and which need aliases.

A device whose memory has a home (host memory: the CPU; GPU memory: CUDA) runs generated
kernels on its own tensors: a generated kernel only reads data pointers, sizes and strides,
and the wrapper allocates its outputs on the device (Target.allocate_outputs). A wrapper
that calls one of the home's ATen functions through the C shim (``aoti_torch_cpu_*``,
``aoti_torch_cuda_*``: extern convolution, the seeds of random ops, attention) needs tensors
of the home device: such an op runs on zero-copy aliases (NeedsHostAliases). Allocation
and stream helpers are not such calls.
"""
from __future__ import annotations

import re

_SHIM_CALL = {"cpu": re.compile(r"aoti_torch_cpu_\w+\("),
              "cuda": re.compile(r"aoti_torch_cuda_\w+\(")}

# Shims that read their tensors only through data pointers, sizes and strides take the
# device's tensors as they are, with no aliases made and handed back per call.
# CPU: the BLAS calls (the out= checks compare devices with each other, the bias copy
# dispatches on the tensor's own device): 2 us of an 8 us addmm. CPU flash attention too:
# the shim calls ATen's CPU kernel directly (at::cpu::), which allocates its outputs with
# the query's options (the device's own allocation) and runs its DispatchStub for kCPU by
# name, not by the tensors' device. Convolution is not one of them: ATen picks its backend
# by the input's device type.
# CUDA: none. Its shims call ATen's CUDA kernels, whose generated wrappers guard the
# tensors' device with a CUDAGuard, which refuses any other device type ("CUDAGuardImpl
# initialized with non-CUDA DeviceType: eagerc": cuBLAS addmm_out on the eagerc device's
# tensors crashed the process on the H100, session 10).
_DEVICE_SAFE = {
    "cpu": frozenset({"aoti_torch_cpu_mm_out(", "aoti_torch_cpu_addmm_out(",
                      "aoti_torch_cpu_bmm_out(", "aoti_torch_cpu_baddbmm_out(",
                      "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu("}),
}


# The CUDA shim's runtime helpers (device guard, raw caching-allocator memory) act on the
# current CUDA device, not on tensors: no ATen function of the home.
_RUNTIME_HELPERS = frozenset({"aoti_torch_cuda_guard_set_index(",
                              "aoti_torch_cuda_caching_allocator_raw_alloc(",
                              "aoti_torch_cuda_caching_allocator_raw_delete("})


def needs_home_aliases(code: str, codegen: str) -> bool:
    """Whether wrapper `code` (generated for `codegen`, "cpu" or "cuda") calls a home
    function that must see tensors of the home device."""
    safe = _DEVICE_SAFE.get(codegen, frozenset()) | _RUNTIME_HELPERS
    calls = _SHIM_CALL.get(codegen)
    return calls is not None and any(m.group(0) not in safe for m in calls.finditer(code))
