#include "unboxed_convolution.h"

#include <ATen/core/stack.h>

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
      // The boxed path's compiled_on_cpu_aliases, typed. The aliases are this thread's,
      // kept from call to call and pointed at this call's tensors (ReusedAlias): a
      // convolution's time depends on the allocations around it, and fresh aliases cost
      // two StorageImpl and TensorImpl pairs per call. Tensors that share a storage keep
      // CallAliases, which gives them one CPU storage (as on the device).
      at::Tensor result;
      if (shares_storage(input, weight) || (has_bias && (shares_storage(input, *bias) ||
                                                         shares_storage(weight, *bias)))) {
        CallAliases aliases;
        const at::Tensor in = aliases.alias(input);
        const at::Tensor w = aliases.alias(weight);
        const at::Tensor b = has_bias ? aliases.alias(*bias) : at::Tensor();
        if (run_on(input, in, w, has_bias ? &b : nullptr, stride, padding, dilation, transposed,
                   output_padding, groups, &result)) {
          return result;
        }
      } else {
        thread_local ReusedAlias input_slot, weight_slot, bias_slot;
        const BoundAlias in(input_slot, input);
        const BoundAlias w(weight_slot, weight);
        std::optional<BoundAlias> b;
        if (has_bias) b.emplace(bias_slot, *bias);
        if (run_on(input, in.get(), w.get(), has_bias ? &b->get() : nullptr, stride, padding,
                   dilation, transposed, output_padding, groups, &result)) {
          return result;
        }
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
                  : device_result(out, input.device(), st.name);
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

  static bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
    return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
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
