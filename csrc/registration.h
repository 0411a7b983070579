// Registers KernelHolders for a dispatch key through torch::Library (the C++
// side of torch.library), and removes them again on disable, which restores the
// device's own kernels.
#pragma once
#include <c10/core/DispatchKey.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "op_state.h"

namespace eagerc {

// Which random ops (ATen's nondeterministic_seeded tag) servable_ops offers to compile.
enum class RandomOps {
  // None: they stay the key's own kernels (override mode on CPU and CUDA).
  Native,
  // All: Inductor's seeded lowering draws them (a new device with no home's kernels to
  // lean on). Reproducible under the seed, not eager's numbers.
  Compiled,
  // Only those whose draw happens inside an ATen kernel the compiled wrapper calls as an
  // extern (attention's dropout, a `dropout_p` argument): a new device whose memory has a
  // home runs the others with the home's ATen kernel on aliases, so they draw eager's
  // numbers from the home's generator at the home kernel's speed (Inductor's C++ draws
  // per element: scalar Philox and Box-Muller, 10-17x ATen's vectorized normal fill).
  InHomeExterns,
};

// Ops that a key could be served by eagerc: every aten op with a kernel for
// `key` (or, with `new_device`, every op) whose schema eagerc can compile, minus
// views, random ops (as `random` says), data-dependent ops and `deny`.
std::vector<std::string> servable_ops(c10::DispatchKey key, bool new_device, RandomOps random,
                                      const std::vector<std::string>& deny);

// Ops a new host-memory device on `key` can run only through ATen's CPU kernel on
// zero-copy aliases (on GPU memory, a CUDA kernel counts too): a CPU kernel, no kernel of
// the device and no composite one, and
// nothing servable_ops would compile: output shapes that depend on values (nonzero,
// unique), schemas eagerc cannot compile (equal returns a bool, histogram several
// tensors), tensors it cannot take (sparse, quantized). Views and `deny` excluded.
std::vector<std::string> aliasable_ops(c10::DispatchKey key, const std::vector<std::string>& deny);

// Registers holders for `ops` ("aten::add.Tensor") on `key`, served as `options` say.
// Returns the ops that were registered and, for the others, why not.
std::pair<std::vector<std::string>, std::vector<std::pair<std::string, std::string>>>
enable_ops(c10::DispatchKey key, const std::vector<std::string>& ops, const ServingOptions& options);

// Removes every holder registered for `key`.
void disable_key(c10::DispatchKey key);

bool is_enabled(c10::DispatchKey key);

// All op states ever created (for stats); the pointers stay valid.
std::vector<std::shared_ptr<OpState>> all_op_states();

}  // namespace eagerc
