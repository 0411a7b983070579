"""Lifted scalars read through their data pointer in a generated wrapper.

Lifted scalars arrive as 0-dim int64/float64 host tensors (csrc/artifact.cpp); reading
them through the data pointer skips the dispatcher call inside ``aoti_torch_item_*``.
"""
from __future__ import annotations

from eagerc.compile.wrapper_source import redirect_calls

_SCALAR_READS = """
static inline AOTITorchError eagerc_item_int64(AtenTensorHandle t, int64_t* out) {
  void* p = nullptr; AOTITorchError e = aoti_torch_get_data_ptr(t, &p);
  if (e == AOTI_TORCH_SUCCESS) *out = *static_cast<const int64_t*>(p);
  return e;
}
static inline AOTITorchError eagerc_item_float64(AtenTensorHandle t, double* out) {
  void* p = nullptr; AOTITorchError e = aoti_torch_get_data_ptr(t, &p);
  if (e == AOTI_TORCH_SUCCESS) *out = *static_cast<const double*>(p);
  return e;
}
"""


def direct_scalar_reads(code: str) -> str:
    """`code` (a CPU or GPU wrapper) reading lifted scalars through their data pointer."""
    return redirect_calls(code, {"aoti_torch_item_int64(": "eagerc_item_int64(",
                                 "aoti_torch_item_float64(": "eagerc_item_float64("}, _SCALAR_READS)
