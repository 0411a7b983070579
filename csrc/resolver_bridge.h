// The miss path: the only place the kernel holder enters Python. It takes the
// GIL once, asks the Python resolver (eagerc/per_op/resolver.py) once for this call's
// answer (a kernel from disk or freshly compiled, the device's own kernel, an interim
// kernel, the host aliases, or eager's error) and remembers it in the L1 table.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "op_state.h"

namespace eagerc {

// What the holder does with a call after a miss.
struct MissOutcome {
  enum class Next : uint8_t { Run, RunOnHostAliases, Fallback, Raise, Interim } next = Next::Fallback;
  const Artifact* artifact = nullptr;  // Run
  std::string reason;                  // Fallback; Raise: the message
  std::string error_kind;              // Raise: "RuntimeError", "IndexError", ...
};

// Resolves a miss of `sig` with one resolver call (an answer for the call keyed by its
// scalar values switches the op to specialized values and replaces `sig` with that key).
// Every decision that is a property of the signature is remembered on the op state or in
// L1, so the next call with the same signature does not come back here.
MissOutcome resolve_miss(OpState& st, const torch::jit::Stack& stack, CallSignature* sig);

// resolver(MissRequest) -> MissAnswer
void set_resolver(pybind11::object resolver);

// How many times C++ called the resolver: once per miss (a hit never does).
uint64_t resolver_calls();

}  // namespace eagerc
