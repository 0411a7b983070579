#include "resolver_bridge.h"

#include <torch/csrc/jit/python/pybind_utils.h>

#include "kernel_holder.h"

namespace py = pybind11;

namespace eagerc {
namespace {

py::object* g_resolver = nullptr;  // leaked: must outlive interpreter teardown order
std::atomic<uint64_t> g_resolver_calls{0};

}  // namespace

void set_resolver(py::object resolver) {
  if (!g_resolver) g_resolver = new py::object();
  *g_resolver = std::move(resolver);
}

uint64_t resolver_calls() { return g_resolver_calls.load(); }

const Artifact* resolve_miss(OpState& st, const torch::jit::Stack& stack,
                             CallSignature* sig, std::string* reason) {
  if (!Py_IsInitialized() || !g_resolver) {
    *reason = "no Python resolver (eagerc is shutting down or not imported)";
    return nullptr;
  }
  py::gil_scoped_acquire gil;
  // Ops the compiler runs for itself (constant folding, checks) stay native.
  ActivityGuard guard;
  const size_t n = st.plan.kinds.size();
  const size_t base = stack.size() - n;
  try {
    py::tuple args(n);
    for (size_t i = 0; i < n; ++i) args[i] = torch::jit::toPyObject(stack[base + i]);
    // A few rounds: a variant found on disk may not pass this call's guard, and
    // an op may switch to specialized scalars; each round makes progress.
    for (int round = 0; round < 4; ++round) {
      g_resolver_calls.fetch_add(1, std::memory_order_relaxed);
      const bool specialize = st.specialize_values.load();
      py::list known;
      for (const auto& id : st.table.variant_ids(sig->key)) known.append(id);
      py::tuple res = (*g_resolver)(st.name, c10::toString(st.dispatch_key),
                                    py::bytes(sig->key), args, specialize, known);
      std::string kind = res[0].cast<std::string>();
      if (kind == "fallback") {
        *reason = res[1].cast<std::string>();
        st.table.mark_fallback(sig->key, *reason);
        return nullptr;
      }
      if (kind == "aliases") {
        st.needs_cpu_aliases.store(true);
        *reason = kRetryOnCpuAliases;
        return nullptr;
      }
      if (kind == "specialize") {
        st.specialize_values.store(true);
        compute_signature(st.plan, stack, true, sig);
        if (sig->unsupported) {
          *reason = sig->unsupported;
          return nullptr;
        }
        auto found = st.table.find(*sig);
        if (found.artifact) return found.artifact;
        if (found.fallback) {
          *reason = *found.fallback;
          return nullptr;
        }
        continue;
      }
      const Artifact* artifact = load_artifact(res[1].cast<std::string>(),
                                               res[2].cast<std::string>(),
                                               res[3].cast<size_t>());
      st.table.insert(sig->key, artifact);
      if (artifact->guard(*sig)) return artifact;
    }
    *reason = "no compiled variant satisfied this call's guards";
  } catch (py::error_already_set& e) {
    *reason = std::string("resolver error: ") + e.what();
  } catch (const std::exception& e) {
    *reason = std::string("resolver error: ") + e.what();
  }
  return nullptr;
}

}  // namespace eagerc
