// The kernel holder's path for ops whose kernels call the memory home's ATen functions
// (cuBLAS, a convolution's backend, random seeds): the call runs on zero-copy aliases of
// its tensors on the home device, and the results come back as the device's tensors.
#include "kernel_holder.h"

#include "host_alias.h"
#include "out_forms.h"

namespace eagerc {

void KernelHolder::restore_device_outputs(const c10::SmallVector<c10::IValue, 8>& original,
                                          c10::Device device, size_t num_returns,
                                          torch::jit::Stack* stack) {
  const OpPlan& plan = state_->plan;
  const c10::Device home = memory_home(device);
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& v = (*stack)[stack->size() - num_returns + r];
    int alias = r < plan.return_alias.size() ? plan.return_alias[r] : -1;
    if (alias >= 0) {
      v = original[alias];  // in-place / out=: the caller's eagerc tensor itself
    } else if (device.is_cpu()) {
      continue;  // no tensor of the device among the arguments: nothing to hand back
    } else if (v.isTensor() && v.toTensor().defined() && v.toTensor().device() == home) {
      v = device_result(std::move(v).toTensor(), device, state_->name);
    } else if (v.isTensorList()) {
      // Taken out of the kernel's list, so that each result is its memory's only holder.
      c10::List<at::Tensor> results = std::move(v).toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(results.size());
      for (size_t i = 0; i < results.size(); ++i) {
        at::Tensor t = results.extract(i);
        out.push_back(t.defined() && t.device() == home ? device_result(std::move(t), device, state_->name)
                                                        : std::move(t));
      }
      v = out;
    }
  }
}

void KernelHolder::compiled_on_cpu_aliases(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                           torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> original(stack->end() - n, stack->end());
  const c10::Device device = swap_to_cpu_aliases(n, stack);
  // A separate buffer: the caller's signature buffer may point into the old stack.
  thread_local CallSignature sig;
  if (out_shape_ == OutShape::Meta) {
    // An out= of another shape than the result's (no kernel has its signature): resized
    // as eager would on the device's own tensors (resizing an alias would not resize
    // them), then aliased again.
    compute_signature(st.plan, *stack, st.specialize_values.load(std::memory_order_relaxed), &sig);
    if (!sig.unsupported && !st.table.find(sig).artifact) {
      torch::jit::drop(*stack, n);
      for (const auto& v : original) stack->push_back(v);
      resize_outs_as_eager(st.op, out_shape_, st.out_args, n, *stack);
      swap_to_cpu_aliases(n, stack);
    }
  }
  MissOutcome outcome = find_or_resolve(*stack, &sig);
  if (outcome.next == MissOutcome::Next::Run) {
    std::string error;
    if (try_run_and_push(*outcome.artifact, sig, stack, &error)) {
      restore_device_outputs(original, device,
                             st.plan.returns_tensor_list ? 1 : st.plan.num_returns, stack);
      return;
    }
    torch::jit::drop(*stack, n);
    for (auto& v : original) stack->push_back(std::move(v));
    kernel_error(op, ks, stack, error);
    return;
  }
  if (outcome.next == MissOutcome::Next::Raise) raise_as(outcome.error_kind, outcome.reason);
  torch::jit::drop(*stack, n);
  for (auto& v : original) stack->push_back(std::move(v));
  if (outcome.next == MissOutcome::Next::Interim) {
    run_interim(op, ks, stack);
    return;
  }
  // Already on aliases: a second "run on aliases" answer cannot make progress.
  fallback(op, ks, stack, outcome.next == MissOutcome::Next::Fallback
                              ? outcome.reason.c_str()
                              : "its kernel needs CPU tensors even on CPU aliases");
}

}  // namespace eagerc
