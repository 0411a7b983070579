#include "unboxed_convolution.h"

#include <ATen/core/stack.h>

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
      // The boxed path's compiled_on_cpu_aliases, typed.
      CallAliases aliases;
      const at::Tensor in = aliases.alias(input);
      const at::Tensor w = aliases.alias(weight);
      const at::Tensor b = has_bias ? aliases.alias(*bias) : at::Tensor();
      thread_local CallSignature sig;
      compute_convolution_signature(in, w, has_bias ? &b : nullptr, stride, padding, dilation,
                                    transposed, output_padding, groups,
                                    st.specialize_values.load(std::memory_order_relaxed), &sig);
      const auto found = sig.unsupported ? KernelTable::Lookup{} : st.table.find(sig);
      if (found.artifact) {
        st.counters.hits.fetch_add(1, std::memory_order_relaxed);
        c10::SmallVector<at::Tensor, 4> outs;
        {
          ActivityGuard guard;
          outs = found.artifact->run(sig);
        }
        at::Tensor& out = outs.at(0);
        if (!out.defined() || out.device() != memory_home(input.device())) return out;
        return device_result(out, input.device(), st.name);
      }
    }
    torch::jit::Stack stack;
    stack.reserve(9);
    torch::jit::push(stack, input, weight, bias, stride, padding, dilation, transposed,
                     output_padding, std::move(groups));
    (*boxed_)(st.op, ks, &stack);
    return std::move(stack.back()).toTensor();
  }

 private:
  // A tensor of the device whose memory is host memory (the aliases are CPU tensors).
  static bool on_device(const at::Tensor& t) {
    return t.defined() && has_other_home(t.device()) && memory_home(t.device()).is_cpu();
  }

  std::shared_ptr<OpState> state_;
  std::shared_ptr<KernelHolder> boxed_;
};

}  // namespace

torch::CppFunction unboxed_convolution_kernel(std::shared_ptr<OpState> state) {
  return torch::CppFunction(UnboxedConvolution(std::move(state)));
}

}  // namespace eagerc
