#include "kernel_holder.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <set>

#include "host_alias.h"

namespace eagerc {
namespace {

thread_local int tls_depth = 0;
std::atomic<bool> g_cpu_fallback{false};

void warn_cpu_fallback_once(const std::string& name, const char* reason) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(name).second) {
    TORCH_WARN("eagerc: ", name, " runs on CPU (EAGERC_CPU_FALLBACK=1): ", reason,
               ". Inputs are copied to CPU and results back.");
  }
}

}  // namespace

ActivityGuard::ActivityGuard() { ++tls_depth; }
ActivityGuard::~ActivityGuard() { --tls_depth; }
bool ActivityGuard::active() { return tls_depth > 0; }

void set_cpu_fallback(bool enabled) { g_cpu_fallback.store(enabled); }

namespace {

// A host-memory device's tensors are swapped for zero-copy CPU aliases, the CPU kernel
// runs on them, and fresh outputs are handed back as tensors of the device over the same
// memory. Returns the device (the first non-CPU tensor's or device argument's).
c10::Device swap_to_cpu_aliases(size_t n, torch::jit::Stack* stack) {
  c10::Device device(c10::kCPU);
  auto alias = [&](const at::Tensor& t) {
    if (!t.defined() || t.is_cpu()) return t;
    device = t.device();
    return cpu_alias(t);
  };
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = alias(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(alias(t));
      v = out;
    } else if (v.isList()) {  // Tensor?[]
      auto list = v.toList();
      c10::impl::GenericList out(list.elementType());
      for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(alias(e.toTensor())) : e);
      v = out;
    } else if (v.isDevice() && !v.toDevice().is_cpu()) {
      device = v.toDevice();
      v = c10::Device(c10::kCPU);
    }
  }
  return device;
}

}  // namespace

void KernelHolder::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                              torch::jit::Stack* stack) {
  OpState& st = *state_;
  if (ActivityGuard::active() && st.native) {
    fallback(op, ks, stack, nullptr);
    return;
  }
  if (st.functional && st.functional_served && !st.run_on_aliases && !ActivityGuard::active()) {
    run_out_variant(stack);
    return;
  }
  if (st.host_aliases) {
    if (ActivityGuard::active() || st.run_on_aliases) {
      run_on_cpu_aliases(op, stack);
      return;
    }
    if (st.compiled_on_host_aliases.load(std::memory_order_relaxed)) {
      compiled_on_cpu_aliases(op, ks, stack);
      return;
    }
  }
  // One signature buffer per thread: its strings and vectors keep their
  // capacity, so a hit allocates nothing for the key.
  thread_local CallSignature sig;
  MissOutcome outcome = find_or_resolve(*stack, &sig);
  switch (outcome.next) {
    case MissOutcome::Next::Run:
      run_and_push(*outcome.artifact, sig, stack);
      return;
    case MissOutcome::Next::RunOnHostAliases:
      compiled_on_cpu_aliases(op, ks, stack);
      return;
    case MissOutcome::Next::Fallback:
      fallback(op, ks, stack, outcome.reason.c_str());
      return;
  }
}

MissOutcome KernelHolder::find_or_resolve(const torch::jit::Stack& stack, CallSignature* sig) {
  OpState& st = *state_;
  compute_signature(st.plan, stack, st.specialize_values.load(std::memory_order_relaxed), sig);
  if (sig->unsupported) return {MissOutcome::Next::Fallback, nullptr, sig->unsupported};
  auto found = st.table.find(*sig);
  if (found.fallback) return {MissOutcome::Next::Fallback, nullptr, *found.fallback};
  if (found.artifact) {
    st.counters.hits.fetch_add(1, std::memory_order_relaxed);
    return {MissOutcome::Next::Run, found.artifact, ""};
  }
  st.counters.misses.fetch_add(1, std::memory_order_relaxed);
  return resolve_miss(st, stack, sig);
}

void KernelHolder::run_out_variant(torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  torch::jit::Stack call;
  for (size_t i = 0; i < n; ++i) {
    if (std::find(st.out_args.begin(), st.out_args.end(), static_cast<int>(i)) == st.out_args.end()) {
      call.push_back(args[i]);
    }
  }
  st.functional->callBoxed(&call);  // dispatched: its own compiled kernel serves it
  st.counters.hits.fetch_add(1, std::memory_order_relaxed);
  for (size_t r = 0; r < st.out_args.size(); ++r) {
    const at::Tensor& out = args[st.out_args[r]].toTensor();
    const at::Tensor& result = call[r].toTensor();
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
  }
  for (int index : st.out_args) stack->push_back(args[index]);
}

void KernelHolder::restore_device_outputs(const c10::SmallVector<c10::IValue, 8>& original,
                                          c10::Device device, size_t num_returns,
                                          torch::jit::Stack* stack) {
  const OpPlan& plan = state_->plan;
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& v = (*stack)[stack->size() - num_returns + r];
    int alias = r < plan.return_alias.size() ? plan.return_alias[r] : -1;
    if (alias >= 0) {
      v = original[alias];  // in-place / out=: the caller's eagerc tensor itself
    } else if (device.is_cpu()) {
      continue;  // no tensor of the device among the arguments: nothing to hand back
    } else if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu()) {
      v = alias_on_device(v.toTensor(), device);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) {
        out.push_back(t.defined() && t.device().is_cpu() ? alias_on_device(t, device) : t);
      }
      v = out;
    }
  }
}

void KernelHolder::run_on_cpu_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> original(stack->end() - n, stack->end());
  const c10::Device device = swap_to_cpu_aliases(n, stack);
  if (st.run_on_aliases) st.counters.aliased.fetch_add(1, std::memory_order_relaxed);
  ActivityGuard guard;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  restore_device_outputs(original, device, st.plan.num_returns, stack);
}

void KernelHolder::compiled_on_cpu_aliases(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                           torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> original(stack->end() - n, stack->end());
  const c10::Device device = swap_to_cpu_aliases(n, stack);
  // A separate buffer: the caller's signature buffer may point into the old stack.
  thread_local CallSignature sig;
  MissOutcome outcome = find_or_resolve(*stack, &sig);
  if (outcome.next == MissOutcome::Next::Run) {
    run_and_push(*outcome.artifact, sig, stack);
    restore_device_outputs(original, device, st.plan.returns_tensor_list ? 1 : st.plan.num_returns,
                           stack);
    return;
  }
  torch::jit::drop(*stack, n);
  for (auto& v : original) stack->push_back(std::move(v));
  // Already on aliases: a second "run on aliases" answer cannot make progress.
  fallback(op, ks, stack, outcome.next == MissOutcome::Next::Fallback
                              ? outcome.reason.c_str()
                              : "its kernel needs CPU tensors even on CPU aliases");
}

void KernelHolder::run_and_push(const Artifact& artifact, const CallSignature& sig,
                                torch::jit::Stack* stack) {
  const OpPlan& plan = state_->plan;
  c10::SmallVector<at::Tensor, 4> outs;
  {
    ActivityGuard guard;
    outs = artifact.run(sig);
  }
  const size_t n = plan.kinds.size();
  const size_t base = stack->size() - n;
  if (plan.returns_tensor_list) {
    c10::List<at::Tensor> list;
    list.reserve(outs.size());
    for (auto& t : outs) list.push_back(std::move(t));
    torch::jit::drop(*stack, n);
    stack->emplace_back(std::move(list));
    return;
  }
  // Returns that alias an argument (in-place self, out=) are that argument:
  // the kernel wrote into it, and the caller must get the same tensor back.
  c10::SmallVector<c10::IValue, 4> rets;
  size_t next = 0;
  for (size_t r = 0; r < plan.num_returns; ++r) {
    int alias = plan.return_alias[r];
    if (alias >= 0) rets.push_back((*stack)[base + alias]);
    else rets.emplace_back(std::move(outs[next++]));
  }
  torch::jit::drop(*stack, n);
  for (auto& v : rets) stack->push_back(std::move(v));
}

void KernelHolder::fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                            torch::jit::Stack* stack, const char* reason) {
  OpState& st = *state_;
  if (reason) st.count_fallback(reason);
  ActivityGuard guard;
  if (st.native) {
    st.native->callBoxed(op, ks, stack);
    return;
  }
  const char* why = reason ? reason : "called from inside a compiled kernel";
  if (g_cpu_fallback.load()) {
    warn_cpu_fallback_once(st.name, why);
    at::native::cpu_fallback(op, stack);
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "eagerc: ", st.name, " cannot run on ",
      c10::toString(st.dispatch_key), ": it could not be compiled (", why,
      "). Either register a hand-written kernel for it (torch.library.impl(\"",
      st.name, "\", \"", c10::toString(st.dispatch_key),
      "\")), or set EAGERC_CPU_FALLBACK=1 to run it on CPU (slow, copies in and out).");
}

}  // namespace eagerc
