// A compiled kernel that C++ runs without Python: a shared library built from
// Inductor's C++ wrapper (cpp_wrapper mode), with two C entry points added by
// eagerc/_compiler.py:
//   int  eagerc_guard(const int64_t* ints, const double* floats)  -> 1 if valid
//   void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs)
// The guard holds every assumption made while tracing with symbolic sizes.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <utility>
#include <vector>

#include "signature.h"

struct AtenTensorOpaque;

namespace eagerc {

class Artifact {
 public:
  using GuardFn = int (*)(const int64_t*, const double*);
  using EntryFn = void (*)(AtenTensorOpaque**, AtenTensorOpaque**);
  using PlanGuardFn = int (*)(void*, const int64_t*, const double*);
  using PlanEntryFn = void (*)(void*, AtenTensorOpaque**, AtenTensorOpaque**);

  // A guard term `ints[index] == value` (a size the kernel was specialized to).
  using Pinned = std::pair<int32_t, int64_t>;

  // Loads (dlopen) the library; throws with the path and dlerror() on failure. `pinned`:
  // some of the guard's own `ints[index] == value` terms (eagerc/compile/guard_source.py
  // reads them from the guard's source), checked here before the library is called.
  Artifact(std::string variant_id, const std::string& path, size_t num_outputs,
           std::vector<Pinned> pinned = {});

  // Whether the guard passes. A key's variants differ mostly in a pinned size (ResNet's
  // 1x1 convolutions: one kernel per weight shape), and the holder tries them in turn: a
  // variant whose pinned terms fail is refused from this object's own memory, without a
  // call into its library (its code and data, cold when calls cycle through many kernels).
  bool guard(const CallSignature& sig) const {
    for (const auto& [index, value] : pinned_) {
      if (static_cast<size_t>(index) >= sig.ints.size() || sig.ints[index] != value) return false;
    }
    return (plan_ ? plan_guard_(plan_, sig.ints.data(), sig.floats.data())
                  : guard_(sig.ints.data(), sig.floats.data())) != 0;
  }

  // Runs the kernel on the call's runtime inputs and returns its outputs.
  c10::SmallVector<at::Tensor, 4> run(const CallSignature& sig) const;

  const std::string& variant_id() const { return variant_id_; }
  const std::string& path() const { return path_; }
  size_t num_outputs() const { return num_outputs_; }
  // Whether its plan runs in a launcher loaded for another artifact (EAGERC_GPU_SHARED_LAUNCHER).
  bool shares_launcher() const { return plan_ != nullptr; }

 private:
  std::string variant_id_;
  std::string path_;
  size_t num_outputs_;
  std::vector<Pinned> pinned_;
  GuardFn guard_ = nullptr;
  EntryFn entry_ = nullptr;
  // A plan launcher's entry that reads the caller's tensors without taking them
  // (eagerc_entry_borrowed); null for a compiled wrapper, whose entry steals its inputs.
  EntryFn borrowed_entry_ = nullptr;
  // A launch plan run by a launcher library already loaded for another artifact built
  // from it (artifact.cpp; EAGERC_GPU_SHARED_LAUNCHER=0 turns it off), not by a copy of its own.
  void* plan_ = nullptr;
  PlanGuardFn plan_guard_ = nullptr;
  PlanEntryFn plan_entry_ = nullptr;
  // Opens the plan in a loaded launcher whose library bytes are `image` (false: none is).
  bool open_in_shared_launcher(const std::string& path, const std::string& image);
};

// Loaded artifacts live as long as the process: a library is never unloaded
// (its code may still be on a stack), so loading one path twice returns the same.
// Throws (with the path and dlerror()) when the library cannot be loaded; the caller
// (eagerc/cache.py) evicts that entry and compiles again.
const Artifact* load_artifact(const std::string& variant_id, const std::string& path,
                              size_t num_outputs, std::vector<Artifact::Pinned> pinned = {});

}  // namespace eagerc
