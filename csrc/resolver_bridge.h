// The miss path: the only place the kernel holder enters Python. It takes the
// GIL once, asks the Python resolver (eagerc/_resolver.py) for a kernel for this
// call (from disk or freshly compiled), loads it and adds it to the L1 table.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "op_state.h"

namespace eagerc {

// The reason resolve_miss gives when the op must be retried on CPU aliases.
constexpr const char* kRetryOnCpuAliases = "retry on CPU aliases";

// Returns the artifact for this call, or null with `reason` set (the caller then
// falls back). May switch the op to specialized values and recompute `sig`.
const Artifact* resolve_miss(OpState& st, const torch::jit::Stack& stack,
                             CallSignature* sig, std::string* reason);

// resolver(op_name, key, args, specialize_values, known_variant_ids) ->
//   ("kernel", variant_id, path, num_outputs) | ("specialize",) | ("aliases",) |
//   ("fallback", reason)
void set_resolver(pybind11::object resolver);

// How many times C++ called the resolver (a hit never does).
uint64_t resolver_calls();

}  // namespace eagerc
