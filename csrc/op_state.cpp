#include "op_state.h"

#include <unordered_map>

namespace eagerc {
namespace {

// Overload names of every operator, by name, built once.
const std::unordered_map<std::string, std::vector<std::string>>& overloads_by_name() {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string, std::vector<std::string>>();
    for (const auto& n : c10::Dispatcher::singleton().getAllOpNames()) {
      (*m)[n.name].push_back(n.overload_name);
    }
    return m;
  }();
  return *index;
}

// The overload of the same op whose arguments are this one's minus the outs.
std::optional<c10::OperatorHandle> find_functional(const c10::FunctionSchema& schema,
                                                   const std::vector<int>& out_args) {
  std::vector<const c10::Argument*> wanted;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (std::find(out_args.begin(), out_args.end(), static_cast<int>(i)) == out_args.end()) {
      wanted.push_back(&schema.arguments()[i]);
    }
  }
  auto it = overloads_by_name().find(schema.name());
  if (it == overloads_by_name().end()) return std::nullopt;
  for (const auto& overload : it->second) {
    auto handle = c10::Dispatcher::singleton().findSchema({schema.name(), overload});
    if (!handle || !handle->hasSchema()) continue;
    const auto& f = handle->schema();
    if (f.arguments().size() != wanted.size() || f.returns().size() != out_args.size()) continue;
    bool same = true;
    for (size_t i = 0; i < wanted.size() && same; ++i) {
      const auto& a = f.arguments()[i];
      same = a.name() == wanted[i]->name() && a.type()->str() == wanted[i]->type()->str() &&
             !(a.alias_info() && a.alias_info()->isWrite());
    }
    for (const auto& r : f.returns()) same = same && !r.alias_info();
    if (same) return handle;
  }
  return std::nullopt;
}

}  // namespace

OpState::OpState(const c10::OperatorHandle& handle, c10::DispatchKey key)
    : op(handle), dispatch_key(key), plan(make_op_plan(handle.schema())) {
  const auto& opname = handle.operator_name();
  name = opname.name + (opname.overload_name.empty() ? "" : "." + opname.overload_name);
  // The kernel the key resolves to before eagerc registers: the device's own, or a
  // composite one (which decomposes into ops eagerc may serve). A CompositeImplicitAutograd
  // op gets a holder only when named (enable(ops=[...])); inside a compile (eager's
  // reference run) it must still reach its decomposition, not its own miss again.
  if (handle.hasKernelForDispatchKey(key) ||
      handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
      handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    native.emplace(handle.getComputedKernelForDispatchKey(key));
    native_is_explicit_composite =
        !handle.hasKernelForDispatchKey(key) &&
        !handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
  }
  // out= overloads: every return is a kwarg-only argument that the op writes.
  const auto& args = handle.schema().arguments();
  for (int alias : plan.return_alias) {
    if (alias < 0 || !args[alias].kwarg_only()) {
      out_args.clear();
      break;
    }
    out_args.push_back(alias);
  }
  if (!out_args.empty()) functional = find_functional(handle.schema(), out_args);
}

void OpState::count_fallback(const std::string& reason) {
  counters.fallbacks.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(reasons_mu_);
  fallback_reasons_[reason] += 1;
}

void OpState::clear_fallback_reasons() {
  std::lock_guard<std::mutex> lock(reasons_mu_);
  fallback_reasons_.clear();
}

std::map<std::string, uint64_t> OpState::fallback_reasons() const {
  std::lock_guard<std::mutex> lock(reasons_mu_);
  return fallback_reasons_;
}

}  // namespace eagerc
