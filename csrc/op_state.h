// Everything eagerc keeps per (operator, dispatch key): the argument plan, the
// device's own kernel (the fallback in override mode), the L1 table and counters.
// States outlive enable/disable so a re-enabled op keeps its loaded kernels.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "arg_kinds.h"
#include "kernel_table.h"

namespace eagerc {

struct OpCounters {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<uint64_t> aliased{0};  // ATen CPU kernel run on zero-copy aliases
  std::atomic<uint64_t> interim{0};  // served by an existing kernel while its own compiles
  // Not compiled, aliases off: the vendor library's kernel the target's code generator
  // lists (Codegen.vendor_externs), run on the device's memory ...
  std::atomic<uint64_t> externs{0};
  // ... or, last, the host round trip: copied to CPU, ATen's CPU kernel, copied back.
  std::atomic<uint64_t> host_round_trips{0};
};

// What registration decided for a device from its target (eagerc/targets.py). The
// holder reads these flags; it never tests a dispatch key.
struct ServingOptions {
  // The device's memory is host memory: CPU kernels may run on zero-copy CPU aliases
  // of its tensors (compiled kernels with extern CPU calls, data-dependent ops).
  bool host_aliases = false;
  // The device has no kernels of its own: an op eagerc cannot compile takes the vendor
  // rungs (a listed extern, else the counted host round trip, or NotImplementedError
  // where that is turned off) instead of calling the device's kernel.
  bool new_device = false;
  // These holders never compile: they run the CPU kernel on aliases (needs host_aliases).
  bool run_on_aliases = false;
};

struct OpState {
  OpState(const c10::OperatorHandle& handle, c10::DispatchKey key);

  c10::OperatorHandle op;
  std::string name;        // "aten::add.Tensor"
  c10::DispatchKey dispatch_key;  // for stats and messages only
  bool host_aliases = false;      // see ServingOptions
  OpPlan plan;
  // The kernel the device had before eagerc; empty on a new device.
  std::optional<c10::SafeKernelFunction> native;
  // `native` is a CompositeExplicitAutograd kernel: neither one registered for the
  // device's key (override mode's CPU or CUDA kernel, a vendor's own) nor a
  // CompositeImplicitAutograd decomposition. It decomposes on the device's tensors, and
  // may not take what the home's kernel takes (math_group_norm views X, which fails for a
  // channels-last X that CPU's native_group_norm serves): a device whose memory has a home
  // runs the home's kernel on aliases before it (KernelHolder::home_before_native).
  bool native_is_explicit_composite = false;
  KernelTable table;
  // For an out= overload: its functional overload and which arguments are the outs.
  // The holder runs the functional op (compiled) and copies into the outs, resizing
  // them as ATen does, since a compiled kernel cannot resize its inputs.
  std::optional<c10::OperatorHandle> functional;
  std::vector<int> out_args;
  bool functional_served = false;  // eagerc registered a holder for `functional` too
  // Data-dependent-shape ops on a host-memory device: always the CPU kernel on aliases.
  bool run_on_aliases = false;
  // Set when this op's kernels call ATen CPU functions (extern mm, convolution):
  // on a host-memory device they then run on zero-copy CPU aliases of its tensors.
  std::atomic<bool> compiled_on_host_aliases{false};
  OpCounters counters;
  // Set when tracing with lifted scalars failed for this op: values then go
  // into the key (one kernel per value) instead of being runtime inputs.
  std::atomic<bool> specialize_values{false};
  // The target's vendor library has this op (Codegen.vendor_externs): with aliases off, a
  // call that cannot be compiled runs that kernel on the device's memory (host memory:
  // ATen's CPU kernel on aliases, the alias fallback's own mechanism) before the host round trip.
  std::atomic<bool> vendor_extern{false};

  void count_fallback(const std::string& reason);
  std::map<std::string, uint64_t> fallback_reasons() const;
  void clear_fallback_reasons();

 private:
  mutable std::mutex reasons_mu_;
  std::map<std::string, uint64_t> fallback_reasons_;
};

}  // namespace eagerc
