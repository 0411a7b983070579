"""A cheap size/stride check of extern kernels' outputs in C++ wrappers (CPU and GPU).

Inductor's wrapper checks the sizes and strides of what an extern kernel (mm, addmm,
convolution, cumsum, CPU flash attention) returned with ``assert_size_stride``, whose
every call builds its error-message pieces (a std::string and a std::stringstream)
before it knows whether anything is wrong: ~1 us per extern call. eagerc's check compares
the same way and allocates nothing; only on a mismatch does it call Inductor's, for its
message and exception.
"""
from __future__ import annotations

from eagerc.compile.wrapper_source import redirect_calls

_CHECK = """
static inline void eagerc_assert_size_stride(AtenTensorHandle t, std::initializer_list<int64_t> sizes,
                                             std::initializer_list<int64_t> strides,
                                             const char* op_name = nullptr) {
  int64_t ndim = 0, numel = 0;
  int64_t* got_sizes = nullptr;
  int64_t* got_strides = nullptr;
  if (aoti_torch_get_dim(t, &ndim) == AOTI_TORCH_SUCCESS &&
      ndim == static_cast<int64_t>(sizes.size()) &&
      aoti_torch_get_numel(t, &numel) == AOTI_TORCH_SUCCESS &&
      aoti_torch_get_sizes(t, &got_sizes) == AOTI_TORCH_SUCCESS &&
      aoti_torch_get_strides(t, &got_strides) == AOTI_TORCH_SUCCESS) {
    if (numel == 0) return;
    bool same = true;
    auto size = sizes.begin();
    auto stride = strides.begin();
    for (int64_t i = 0; i < ndim && same; ++i, ++size, ++stride) {
      same = *size == got_sizes[i] && (*stride == got_strides[i] || got_sizes[i] <= 1);
    }
    if (same) return;
  }
  torch::aot_inductor::assert_size_stride(t, sizes, strides, op_name);  // raises, with its message
}
"""


def cheap_output_asserts(code: str) -> str:
    """`code` (a C++ wrapper) checking extern outputs with eagerc_assert_size_stride."""
    return redirect_calls(code, {"assert_size_stride(": "eagerc_assert_size_stride("}, _CHECK)
