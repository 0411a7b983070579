#include "resolver_bridge.h"

#include <torch/csrc/jit/python/pybind_utils.h>

#include "kernel_holder.h"
#include "miss.h"

namespace py = pybind11;

namespace eagerc {
namespace {

py::object* g_resolver = nullptr;  // leaked: must outlive interpreter teardown order
std::atomic<uint64_t> g_resolver_calls{0};

MissOutcome fallback(OpState& st, const CallSignature& sig, std::string reason) {
  // Remembered in L1: the next call with this signature falls back without Python.
  st.table.mark_fallback(sig.key, reason);
  return {MissOutcome::Next::Fallback, nullptr, std::move(reason)};
}

// The request for the call keyed by `sig` (its runtime layout computed here: the hit
// path does not record it).
MissRequest request_for(const OpState& st, const torch::jit::Stack& stack, const py::tuple& args,
                        bool specialize_values, const CallSignature& sig) {
  MissRequest request;
  request.op_name = st.name;
  request.dispatch_key = c10::toString(st.dispatch_key);
  request.args = args;
  request.specialize_values = specialize_values;
  CallSignature with_layout;
  compute_signature(st.plan, stack, specialize_values, &with_layout, &request.layout);
  request.key = sig.key;
  request.parallel = sig.parallel;
  request.known_variants = st.table.variant_ids(sig.key);
  request.ints.assign(sig.ints.begin(), sig.ints.end());
  request.floats.assign(sig.floats.begin(), sig.floats.end());
  return request;
}

bool lifts_scalars(const std::vector<RuntimeSlot>& layout) {
  for (const auto& slot : layout) {
    if (slot.kind != SlotKind::Tensor) return true;
  }
  return false;
}

// What the holder does with the answer, for the signature `sig` it answers; remembered in
// L1 where the answer is a property of the signature.
MissOutcome apply(OpState& st, const CallSignature& sig, const MissAnswer& answer,
                  const std::string& dispatch_key) {
  for (const Artifact* other : answer.passed_over) st.table.insert(sig.key, other);
  switch (answer.action) {
    case MissAction::Kernel:
      st.table.insert(sig.key, answer.artifact);
      // The resolver checked the guard (MissRequest.admits); a kernel that does not pass
      // is the resolver's error, not the signature's: not remembered.
      if (!answer.artifact->guard(sig)) {
        return {MissOutcome::Next::Fallback, nullptr,
                "the resolver's kernel does not pass this call's guard"};
      }
      return {MissOutcome::Next::Run, answer.artifact, ""};
    case MissAction::Fallback:
      if (!answer.remember) return {MissOutcome::Next::Fallback, nullptr, answer.reason};
      return fallback(st, sig, answer.reason);
    case MissAction::Raise: {
      // Eager raises for this call (a user error): never remembered.
      MissOutcome raise{MissOutcome::Next::Raise, nullptr, answer.reason};
      raise.error_kind = answer.error_kind;
      return raise;
    }
    case MissAction::Interim:
      return {MissOutcome::Next::Interim, nullptr, ""};
    case MissAction::RunOnHostAliases:
      if (!st.host_aliases) {
        return fallback(st, sig, "its kernel calls CPU functions and " + dispatch_key +
                                     " memory is not host memory");
      }
      st.compiled_on_host_aliases.store(true);
      return {MissOutcome::Next::RunOnHostAliases, nullptr, ""};
  }
  return {MissOutcome::Next::Fallback, nullptr, "unknown resolver answer"};
}

}  // namespace

void set_resolver(py::object resolver) {
  if (!g_resolver) g_resolver = new py::object();
  *g_resolver = std::move(resolver);
}

uint64_t resolver_calls() { return g_resolver_calls.load(); }

MissOutcome resolve_miss(OpState& st, const torch::jit::Stack& stack, CallSignature* sig) {
  if (!Py_IsInitialized() || !g_resolver) {
    return {MissOutcome::Next::Fallback, nullptr,
            "no Python resolver (eagerc is shutting down or not imported)"};
  }
  py::gil_scoped_acquire gil;
  // Ops the compiler runs for itself (constant folding, checks) stay native.
  ActivityGuard guard;
  const size_t n = st.plan.kinds.size();
  const size_t base = stack.size() - n;
  try {
    py::tuple args(n);
    for (size_t i = 0; i < n; ++i) args[i] = torch::jit::toPyObject(stack[base + i]);
    const bool specialized = st.specialize_values.load();
    MissRequest request = request_for(st, stack, args, specialized, *sig);
    // The same call keyed by its scalar values, for a resolver whose lifted trace fails:
    // it goes on with it in the same call instead of sending the holder round again.
    CallSignature values;
    bool values_computed = false;
    if (!specialized && lifts_scalars(request.layout)) {
      compute_signature(st.plan, stack, true, &values);
      values_computed = true;
      if (!values.unsupported) {
        request.with_values = std::make_unique<MissRequest>(request_for(st, stack, args, true, values));
      }
    }
    const std::string dispatch_key = request.dispatch_key;
    g_resolver_calls.fetch_add(1, std::memory_order_relaxed);
    MissAnswer answer = (*g_resolver)(py::cast(std::move(request))).cast<MissAnswer>();
    if (answer.specialized) {
      // The answer is the values signature's: the op keys its calls by values from now on.
      st.specialize_values.store(true);
      if (!values_computed) compute_signature(st.plan, stack, true, &values);
      if (values.unsupported) return {MissOutcome::Next::Fallback, nullptr, values.unsupported};
      *sig = std::move(values);
    }
    return apply(st, *sig, answer, dispatch_key);
  } catch (py::error_already_set& e) {
    // Not remembered: a resolver error is not a property of the signature.
    return {MissOutcome::Next::Fallback, nullptr, std::string("resolver error: ") + e.what()};
  } catch (const std::exception& e) {
    return {MissOutcome::Next::Fallback, nullptr, std::string("resolver error: ") + e.what()};
  }
}

}  // namespace eagerc
