// The holder's ladder for a call that no compiled kernel serves (KernelHolder::fallback),
// in the order docs/vendor.md gives: the device's own (native) kernel; ATen's kernel of the
// memory's home on zero-copy aliases (KernelHolder::run_on_cpu_aliases; before a native that
// is only a CompositeExplicitAutograd kernel, KernelHolder::home_before_native); with aliases off,
// an extern the code generator lists; the counted host round trip; else
// NotImplementedError naming the op and the ways forward.
#include <ATen/native/CPUFallback.h>

#include <atomic>
#include <mutex>
#include <set>

#include "home_generator.h"
#include "host_alias.h"
#include "kernel_holder.h"

namespace eagerc {
namespace {

// The host round trip is the last rung for a device with no native kernels (on by default;
// EAGERC_CPU_FALLBACK=0 raises instead).
std::atomic<bool> g_cpu_fallback{true};
std::atomic<bool> g_alias_fallback{true};

// One Python warning per op (not per call): the round trip is counted per op in stats().
void warn_host_round_trip_once(const std::string& name, const c10::DispatchKey key, const char* reason) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(name).second) {
    TORCH_WARN("eagerc: ", name, " runs through the host round trip on ",
               c10::DeviceTypeName(c10::dispatchKeyToDeviceType(key), /*lower_case=*/true),
               " (no compiled kernel: ", reason,
               "): its inputs are copied to CPU, ATen's CPU kernel runs, its results are copied "
               "back. Counted per op as host_round_trips in eagerc.stats(); EAGERC_CPU_FALLBACK=0 "
               "raises instead.");
  }
}

// The host round trip runs the CPU's kernel. An op with none (matmul_backward: NestedTensor
// kernels only) fails as eager's dispatcher fails it on a device without a kernel, naming
// the device rather than the CPU the round trip would move the failure to.
void check_cpu_has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU), "Could not run '",
      op.operator_name().name, "' with arguments from the '",
      key == c10::DispatchKey::PrivateUse1 ? c10::get_privateuse1_backend() : c10::toString(key),
      "' backend. This could be because the operator doesn't exist for this backend, or was "
      "omitted during the selective/custom build process (if using custom build).");
}

}  // namespace

void set_cpu_fallback(bool enabled) { g_cpu_fallback.store(enabled); }

bool run_host_round_trip_if_on(const c10::OperatorHandle& op, c10::DispatchKey key, size_t num_args,
                               torch::jit::Stack* stack) {
  if (!g_cpu_fallback.load(std::memory_order_relaxed)) return false;
  check_cpu_has_kernel(op, key);
  ActivityGuard guard;
  cpu_home_generators(num_args, stack);
  at::native::cpu_fallback(op, stack);
  return true;
}
void set_alias_fallback(bool enabled) { g_alias_fallback.store(enabled); }
bool alias_fallback_enabled() { return g_alias_fallback.load(std::memory_order_relaxed); }

bool home_has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key) {
  const c10::Device home = memory_home(c10::Device(c10::dispatchKeyToDeviceType(key), 0));
  // The dispatch table's computed entry: the home's own kernel, a composite or a fallback.
  return op.hasComputedKernelForDispatchKey(c10::computeDispatchKey(std::nullopt, c10::kStrided, home));
}

namespace {

// Arguments CUDA's kernel takes only contiguous: CUDA's composite group_norm makes X
// contiguous before it calls native_group_norm, which checks it, while a PrivateUse1
// device's composite hands X on in its suggested memory format (a channels-last X raised
// "Expected X.is_contiguous(memory_format)", which native CUDA never raises). The same
// rule for eager's check: eagerc/per_op/eager_rules.py's _CONTIGUOUS_ON_HOME.
void contiguous_for_cuda(const c10::OperatorHandle& op, size_t n, torch::jit::Stack* stack) {
  const std::string& name = op.operator_name().name;
  size_t count = 0;
  if (name == "aten::native_group_norm") {
    count = 1;  // input
  } else if (name == "aten::native_group_norm_backward") {
    count = 2;  // grad_out, input
  }
  for (size_t i = 0; i < count; ++i) {
    c10::IValue& v = (*stack)[stack->size() - n + i];
    if (v.isTensor() && v.toTensor().defined() && !v.toTensor().is_contiguous()) {
      v = v.toTensor().contiguous();
    }
  }
}

}  // namespace

void KernelHolder::run_on_cpu_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> original(stack->end() - n, stack->end());
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;
  const c10::Device device = swap_to_cpu_aliases(n, stack, &st.plan, &written);
  // Counted as aliased where aliases are on; with them off the fallback's rung counts it.
  if (st.run_on_aliases && alias_fallback_enabled()) {
    st.counters.aliased.fetch_add(1, std::memory_order_relaxed);
  }
  ActivityGuard guard;
  // The home device's own kernel (ATen's CPU kernel for host memory).
  const c10::Device home = memory_home(device);
  if (home.is_cuda()) contiguous_for_cuda(op, n, stack);
  op.redispatchBoxed(c10::DispatchKeySet(c10::computeDispatchKey(std::nullopt, c10::kStrided, home)),
                     stack);
  for (const auto& [device_tensor, alias] : written) sync_written(device_tensor, alias);
  restore_device_outputs(original, device, st.plan.num_returns, stack);
}

bool KernelHolder::home_before_native(const c10::OperatorHandle& op) const {
  const OpState& st = *state_;
  return st.host_aliases && st.native_is_explicit_composite && alias_fallback_enabled() &&
         home_has_kernel(op, st.dispatch_key);
}

void KernelHolder::run_native(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                              torch::jit::Stack* stack) {
  OpState& st = *state_;
  const bool home_aliases = st.host_aliases && alias_fallback_enabled() &&
                            home_has_kernel(op, st.dispatch_key);
  if (!home_aliases) {
    st.native->callBoxed(op, ks, stack);
    return;
  }
  // The arguments are kept (reference counts, no copies of data) so the home can run the
  // call if the composite turns out to have no kernel for this device type.
  const size_t n = st.plan.kinds.size();
  const size_t base = stack->size() - n;
  c10::SmallVector<c10::IValue, 8> arguments(stack->end() - n, stack->end());
  auto run_on_home_instead = [&] {
    // Whatever the failed call left above the caller's part of the stack is dropped.
    if (stack->size() > base) stack->resize(base);
    for (auto& v : arguments) stack->push_back(std::move(v));
    st.counters.aliased.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_aliases(op, stack);
  };
  try {
    st.native->callBoxed(op, ks, stack);
  } catch (const c10::NotImplementedError&) {
    run_on_home_instead();
  } catch (const c10::Error& e) {
    // A composite that calls a per-device DispatchStub itself (conj_physical_ calls
    // conj_physical_stub for a complex self) finds no PrivateUse1 entry there and raises
    // before it computes anything: the home's kernel serves the call.
    if (e.msg().find("DispatchStub: missing kernel") == std::string::npos) throw;
    run_on_home_instead();
  }
}

void KernelHolder::fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                            torch::jit::Stack* stack, const char* reason) {
  OpState& st = *state_;
  if (reason) st.count_fallback(reason);
  ActivityGuard guard;
  const bool aliases = g_alias_fallback.load(std::memory_order_relaxed);
  // On a device with GPU memory a composite fallback can fail: some composites pick a
  // backend by the tensors' device type (convolution -> _convolution ->
  // convolution_overrideable raised NotImplementedError for ResNet-50 on the H100). CUDA's
  // own kernel on zero-copy aliases serves any op CUDA has, composites included.
  const bool gpu_home = st.host_aliases &&
                        memory_home(c10::Device(c10::DeviceType::PrivateUse1, 0)).is_cuda();
  // What the home lacks (CUDA has no histogram) aliases cannot serve: the later rungs do.
  const bool home_kernel = st.host_aliases && home_has_kernel(op, st.dispatch_key);
  // A CompositeExplicitAutograd native decomposes on the device's tensors and may not take
  // what the home's kernel takes (math_group_norm views a channels-last X): the home's
  // kernel on aliases runs first there too (home_before_native).
  if (st.native && !(gpu_home && aliases && home_kernel) && !home_before_native(op)) {
    run_native(op, ks, stack);
    return;
  }
  if (home_kernel && aliases) {
    // The device's memory has a home whose ATen kernels address it (host memory: CPU):
    // the op runs there on zero-copy aliases, no copies, eager's own semantics.
    st.counters.aliased.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_aliases(op, stack);
    return;
  }
  // Aliases off (a device with no native kernels, as a vendor's): the last two rungs.
  if (home_kernel && st.vendor_extern.load(std::memory_order_relaxed)) {
    // An extern the target's vendor library offers (Codegen.vendor_externs: what Inductor's
    // C shim calls for this op), run on the device's memory. Where that memory has a home
    // (host memory: the CPU; GPU memory: CUDA) the vendor library is the home's ATen
    // kernel, run on zero-copy aliases: the alias fallback's mechanism, limited to the
    // listed ops and counted as externs.
    st.counters.externs.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_aliases(op, stack);
    return;
  }
  const char* why = reason ? reason : "called from inside a compiled kernel";
  if (g_cpu_fallback.load(std::memory_order_relaxed)) {
    // The host round trip: ATen's cpu_fallback copies the inputs to CPU, runs the CPU
    // kernel, copies the results to the device and writes mutated arguments (in-place
    // self, out=) back into the device's tensors.
    check_cpu_has_kernel(op, st.dispatch_key);
    st.counters.host_round_trips.fetch_add(1, std::memory_order_relaxed);
    warn_host_round_trip_once(st.name, st.dispatch_key, why);
    cpu_home_generators(st.plan.kinds.size(), stack);
    at::native::cpu_fallback(op, stack);
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "eagerc: ", st.name, " cannot run on ",
      c10::toString(st.dispatch_key), ": it could not be compiled (", why,
      ") and the host round trip is off (EAGERC_CPU_FALLBACK=0). Either register a "
      "hand-written kernel for it (torch.library.impl(\"", st.name, "\", \"",
      c10::toString(st.dispatch_key),
      "\")), or unset EAGERC_CPU_FALLBACK to run it on CPU (slow: its inputs are copied in "
      "and its results out, counted in eagerc.stats()).");
}

}  // namespace eagerc
