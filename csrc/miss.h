// The typed seam between the kernel holder and the Python resolver (eagerc/per_op/resolver.py).
//
// On an L1 miss C++ hands Python one MissRequest and gets one MissAnswer back (one call
// per miss, no rounds); both are pybind classes (eagerc._C.MissRequest / MissAnswer), so
// the contract is checked by types, not kept by convention.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "artifact.h"
#include "runtime_layout.h"

namespace eagerc {

struct MissRequest {
  std::string op_name;        // "aten::add.Tensor"
  std::string dispatch_key;   // "CPU", "PrivateUse1"
  std::string key;            // the signature bytes
  pybind11::tuple args;       // the call's arguments, as Python values
  std::vector<RuntimeSlot> layout;
  bool parallel = false;      // the call is large enough for a parallel kernel
  bool specialize_values = false;
  std::vector<std::string> known_variants;  // already in L1 for this key: skip them
  // The signature's guard values (sizes, strides, int and float scalars), for admits().
  std::vector<int64_t> ints;
  std::vector<double> floats;
  // The same call keyed with its scalar values (lifted scalars that do not trace ask for
  // it): set when the op still lifts scalars and this call has some, else null.
  std::unique_ptr<MissRequest> with_values;

  // Whether `artifact`'s guard passes for this call (a stored variant may not).
  bool admits(const Artifact& artifact) const;
};

// What the holder does with the call; every miss gets exactly one answer.
enum class MissAction : uint8_t {
  Kernel,            // run `artifact` (inserted into L1)
  RunOnHostAliases,  // the kernel calls CPU functions: run it on zero-copy CPU aliases
  Fallback,          // cannot be compiled: the device's own kernel (or an error) serves it
  Raise,             // eager raises for this call: raise `error_kind(reason)` (not remembered)
  Interim,           // the kernel compiles in the background: an existing kernel serves this
                     // call (the device's own, the home device's on aliases, or the host
                     // round trip); not remembered
};

struct MissAnswer {
  MissAction action = MissAction::Fallback;
  const Artifact* artifact = nullptr;  // Kernel
  std::string reason;                  // Fallback
  // Fallback: whether the reason is a property of the signature (then L1 remembers it);
  // a transient failure is asked about again on the next call.
  bool remember = true;
  std::string error_kind;              // Raise: "RuntimeError", "IndexError", ...
  // The answer is for the request's `with_values` signature: the op keys its calls by
  // scalar values from now on.
  bool specialized = false;
  // Kernel, Interim: stored variants of the key loaded on the way whose guards refused
  // this call (L1 holds them for the calls they fit).
  std::vector<const Artifact*> passed_over;
};

void init_miss_bindings(pybind11::module& m);

}  // namespace eagerc
