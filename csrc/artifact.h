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

#include "signature.h"

struct AtenTensorOpaque;

namespace eagerc {

class Artifact {
 public:
  using GuardFn = int (*)(const int64_t*, const double*);
  using EntryFn = void (*)(AtenTensorOpaque**, AtenTensorOpaque**);

  // Loads (dlopen) the library; throws with the path and dlerror() on failure.
  Artifact(std::string variant_id, const std::string& path, size_t num_outputs);

  bool guard(const CallSignature& sig) const {
    return guard_(sig.ints.data(), sig.floats.data()) != 0;
  }

  // Runs the kernel on the call's runtime inputs and returns its outputs.
  c10::SmallVector<at::Tensor, 4> run(const CallSignature& sig) const;

  const std::string& variant_id() const { return variant_id_; }
  const std::string& path() const { return path_; }
  size_t num_outputs() const { return num_outputs_; }

 private:
  std::string variant_id_;
  std::string path_;
  size_t num_outputs_;
  GuardFn guard_ = nullptr;
  EntryFn entry_ = nullptr;
  // A plan launcher's entry that reads the caller's tensors without taking them
  // (eagerc_entry_borrowed); null for a compiled wrapper, whose entry steals its inputs.
  EntryFn borrowed_entry_ = nullptr;
};

// Loaded artifacts live as long as the process: a library is never unloaded
// (its code may still be on a stack), so loading one path twice returns the same.
// Throws (with the path and dlerror()) when the library cannot be loaded; the caller
// (eagerc/cache.py) evicts that entry and compiles again.
const Artifact* load_artifact(const std::string& variant_id, const std::string& path,
                              size_t num_outputs);

}  // namespace eagerc
