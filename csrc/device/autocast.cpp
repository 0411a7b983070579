// Autocast on the eagerc device: `torch.autocast("eagerc", dtype=...)` casts the same ops the
// same way CUDA's autocast does, from torch's per-policy op lists (ATen/autocast_mode.h
// offers them to backends), and every other op falls through to the device's kernels.
// Without it an enabled autocast region on the device reached no kernel at all, and
// torch.amp refused the device as an autocast target.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "runtime.h"

namespace eagerc::device {

void register_autocast() {
  // Runtime libraries, as register_ops' (a static TORCH_LIBRARY_IMPL would claim
  // AutocastPrivateUse1 even when another backend owns PrivateUse1). Never destroyed.
  auto* every_op = new torch::Library(torch::Library::IMPL, "_",
                                      c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  every_op->fallback(torch::CppFunction::makeFallthrough());

  auto* lib = new torch::Library(torch::Library::IMPL, "aten",
                                 c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  torch::Library& m = *lib;  // the KERNEL_* macros register through `m`
  // The redispatch signatures in torch's lists name ATen types unqualified (which ones
  // varies by torch version: where named tensors exist, norm's overloads take a DimnameList).
#if __has_include(<ATen/core/Dimname.h>)
  using at::Dimname;
  using at::DimnameList;
#endif
  using at::IntArrayRef;
  using at::Scalar;
  using at::ScalarType;
  using at::Tensor;
  using at::TensorList;
#define EAGERC_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define EAGERC_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define EAGERC_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define EAGERC_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define EAGERC_REDISPATCH(FUNC, NAME, SIGNATURE, REDISPATCH, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(FUNC, NAME, SIGNATURE, REDISPATCH, POLICY)
  AT_FORALL_LOWER_PRECISION_FP(EAGERC_LOWER_PRECISION)
  AT_FORALL_FP32(EAGERC_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(EAGERC_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(EAGERC_REDISPATCH)
  AT_FORALL_PROMOTE(EAGERC_PROMOTE)
#undef EAGERC_LOWER_PRECISION
#undef EAGERC_FP32
#undef EAGERC_FP32_SET_OPT_DTYPE
#undef EAGERC_PROMOTE
#undef EAGERC_REDISPATCH
}

}  // namespace eagerc::device
