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
    MissRequest request;
    request.op_name = st.name;
    request.dispatch_key = c10::toString(st.dispatch_key);
    request.args = py::tuple(n);
    for (size_t i = 0; i < n; ++i) request.args[i] = torch::jit::toPyObject(stack[base + i]);
    // A few rounds: a variant found on disk may not pass this call's guard, and
    // an op may switch to specialized scalars; each round makes progress.
    for (int round = 0; round < 4; ++round) {
      g_resolver_calls.fetch_add(1, std::memory_order_relaxed);
      request.specialize_values = st.specialize_values.load();
      CallSignature with_layout;
      compute_signature(st.plan, stack, request.specialize_values, &with_layout, &request.layout);
      request.key = sig->key;
      request.parallel = sig->parallel;
      request.known_variants = st.table.variant_ids(sig->key);
      MissAnswer answer = (*g_resolver)(request).cast<MissAnswer>();
      switch (answer.action) {
        case MissAction::Fallback:
          if (!answer.remember) return {MissOutcome::Next::Fallback, nullptr, answer.reason};
          return fallback(st, *sig, answer.reason);
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
            return fallback(st, *sig, "its kernel calls CPU functions and " +
                                          request.dispatch_key + " memory is not host memory");
          }
          st.compiled_on_host_aliases.store(true);
          return {MissOutcome::Next::RunOnHostAliases, nullptr, ""};
        case MissAction::SpecializeValues: {
          st.specialize_values.store(true);
          compute_signature(st.plan, stack, true, sig);
          if (sig->unsupported) return {MissOutcome::Next::Fallback, nullptr, sig->unsupported};
          auto found = st.table.find(*sig);
          if (found.artifact) return {MissOutcome::Next::Run, found.artifact, ""};
          if (found.fallback) return {MissOutcome::Next::Fallback, nullptr, *found.fallback};
          continue;
        }
        case MissAction::Kernel:
          st.table.insert(sig->key, answer.artifact);
          if (answer.artifact->guard(*sig)) return {MissOutcome::Next::Run, answer.artifact, ""};
          continue;
      }
    }
    return {MissOutcome::Next::Fallback, nullptr,
            "no compiled variant satisfied this call's guards"};
  } catch (py::error_already_set& e) {
    // Not remembered: a resolver error is not a property of the signature.
    return {MissOutcome::Next::Fallback, nullptr, std::string("resolver error: ") + e.what()};
  } catch (const std::exception& e) {
    return {MissOutcome::Next::Fallback, nullptr, std::string("resolver error: ") + e.what()};
  }
}

}  // namespace eagerc
