// Which scaled_dot_product_attention implementation the device's tensors take.
//
// ATen's composite scaled_dot_product_attention asks a per-device stub
// (_fused_sdp_choice_stub) for a fused backend and takes the unfused math path (matmul,
// softmax, matmul: seven ops and two score-sized temporaries) on a device that has no
// stub. On host memory the CPU's choice applies: the same checks (shapes, mask, dropout,
// head size, torch.backends' flags) on zero-copy aliases, and its fused kernel,
// _scaled_dot_product_flash_attention_for_cpu, is what the device's kernel holder then
// serves (Inductor calls ATen's CPU kernel for it). On GPU memory the math path stays: the
// composite pads only CUDA tensors for the CUDA flash kernel.
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>

#include "host_alias.h"
#include "device/runtime.h"

namespace eagerc::device {
namespace {

int64_t attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (memory_home(query.device()).type() != c10::DeviceType::CPU) {
    return static_cast<int64_t>(sdp::SDPBackend::math);
  }
  CallAliases aliases;
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = aliases.alias(*attn_mask);
  return at::_fused_sdp_choice(aliases.alias(query), aliases.alias(key), aliases.alias(value),
                               mask, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace

void register_attention_choice() {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&attention_choice);
}

}  // namespace eagerc::device
