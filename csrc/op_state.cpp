#include "op_state.h"

namespace eagerc {

OpState::OpState(const c10::OperatorHandle& handle, c10::DispatchKey key)
    : op(handle), dispatch_key(key), plan(make_op_plan(handle.schema())) {
  const auto& opname = handle.operator_name();
  name = opname.name + (opname.overload_name.empty() ? "" : "." + opname.overload_name);
  if (handle.hasKernelForDispatchKey(key)) {
    native.emplace(handle.getComputedKernelForDispatchKey(key));
  }
}

void OpState::count_fallback(const std::string& reason) {
  counters.fallbacks.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(reasons_mu_);
  fallback_reasons_[reason] += 1;
}

std::map<std::string, uint64_t> OpState::fallback_reasons() const {
  std::lock_guard<std::mutex> lock(reasons_mu_);
  return fallback_reasons_;
}

}  // namespace eagerc
