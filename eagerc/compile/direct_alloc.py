"""Outputs of an artifact allocated without the dispatcher (csrc/direct_alloc.cpp).

Inductor's wrapper allocates through ``aoti_torch_empty_strided``: at::empty_strided through
the dispatcher, and on the eagerc device its runtime op too (~0.5 us a call, one call per
output; a native CPU kernel allocates directly). The wrapper calls a function pointer
instead, which starts as ``aoti_torch_empty_strided`` and which the C++ loader replaces, when
it loads the library, with eagerc's direct allocation (the same tensor: sizes, strides,
dtype, the device's allocator and dispatch key; for a GPU wrapper, CUDA's caching allocator
on the current device). A loader that does not know about it leaves the shim in place: the
library is correct either way.
"""
from __future__ import annotations

from eagerc.compile.wrapper_source import redirect_calls

_POINTER = """
static AOTITorchError (*eagerc_empty_strided)(int64_t, const int64_t*, const int64_t*, int32_t,
                                              int32_t, int32_t, AtenTensorHandle*) =
    aoti_torch_empty_strided;
extern "C" void eagerc_set_allocator(void* fn) {
  eagerc_empty_strided = reinterpret_cast<decltype(eagerc_empty_strided)>(fn);
}
"""


def direct_allocations(code: str) -> str:
    """`code` (a CPU or GPU wrapper) calling eagerc_empty_strided where it called the shim."""
    return redirect_calls(code, {"aoti_torch_empty_strided(": "eagerc_empty_strided("}, _POINTER)
