#include "unboxed_convolution.h"

#include <ATen/core/stack.h>

#include <array>
#include <optional>

#include "host_alias.h"
#include "kernel_holder.h"
#include "signature.h"

namespace eagerc {
namespace {

class UnboxedConvolution {
 public:
  explicit UnboxedConvolution(std::shared_ptr<OpState> state)
      : state_(state), boxed_(std::make_shared<KernelHolder>(std::move(state))) {}

  at::Tensor operator()(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                        c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                        c10::SymIntArrayRef output_padding, c10::SymInt groups) const {
    OpState& st = *state_;
    const bool has_bias = bias.has_value() && bias->defined();
    if (st.host_aliases && !st.run_on_aliases && !ActivityGuard::active() &&
        st.compiled_on_host_aliases.load(std::memory_order_relaxed) && on_device(input) &&
        on_device(weight) && weight.device() == input.device() &&
        (!has_bias || (on_device(*bias) && bias->device() == input.device()))) {
      // The boxed path's compiled_on_cpu_aliases, typed, on this call site's reused aliases
      // (ArgumentAliases): a convolution's time depends on the allocations around it, and
      // fresh aliases cost two StorageImpl and TensorImpl pairs per call.
      thread_local std::array<ReusedAlias, 3> slots;
      const ArgumentAliases<3> aliases(slots, {&input, &weight, has_bias ? &*bias : nullptr});
      const auto& on_alias = aliases.get();
      at::Tensor result;
      if (run_on(input, *on_alias[0], *on_alias[1], on_alias[2], stride, padding, dilation,
                 transposed, output_padding, groups, &result)) {
        return result;
      }
    }
    return boxed(ks, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                 std::move(groups));
  }

 private:
  // On an L1 hit, runs the artifact on the aliases, stores its result (on the device) in
  // `result` and returns true; else returns false, having run nothing.
  bool run_on(const at::Tensor& input, const at::Tensor& in, const at::Tensor& w,
              const at::Tensor* b, c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
              c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
              const c10::SymInt& groups, at::Tensor* result) const {
    OpState& st = *state_;
    thread_local CallSignature sig;
    compute_convolution_signature(in, w, b, stride, padding, dilation, transposed,
                                  output_padding, groups,
                                  st.specialize_values.load(std::memory_order_relaxed), &sig);
    at::Tensor out;
    if (!run_typed_hit(st, sig, &out)) return false;
    *result = !out.defined() || out.device() != memory_home(input.device())
                  ? std::move(out)
                  : device_result(std::move(out), input.device(), st.name);
    return true;
  }

  at::Tensor boxed(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                   c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                   c10::SymIntArrayRef output_padding, c10::SymInt groups) const {
    torch::jit::Stack stack;
    stack.reserve(9);
    torch::jit::push(stack, input, weight, bias, stride, padding, dilation, transposed,
                     output_padding, std::move(groups));
    (*boxed_)(state_->op, ks, &stack);
    return std::move(stack.back()).toTensor();
  }

  // A tensor of the device, whose memory has a home device (host memory: CPU aliases; GPU
  // memory: CUDA aliases, on which cuDNN runs).
  static bool on_device(const at::Tensor& t) {
    return t.defined() && has_other_home(t.device());
  }

  std::shared_ptr<OpState> state_;
  std::shared_ptr<KernelHolder> boxed_;
};

}  // namespace

torch::CppFunction unboxed_convolution_kernel(std::shared_ptr<OpState> state) {
  return torch::CppFunction(UnboxedConvolution(std::move(state)));
}

}  // namespace eagerc
