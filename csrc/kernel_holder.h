// The boxed kernel eagerc registers for every (op, dispatch key) it serves.
// Hit path (C++ only, no GIL): signature -> L1 table -> guard -> run -> push.
// Miss path: one call into the Python resolver (resolver_bridge.cpp).
#pragma once
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/stack.h>

#include <memory>

#include "op_state.h"
#include "out_forms.h"
#include "resolver_bridge.h"

namespace eagerc {

class KernelHolder final : public c10::OperatorKernel {
 public:
  explicit KernelHolder(std::shared_ptr<OpState> state);

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                  torch::jit::Stack* stack);

 private:
  // Signature, L1 lookup and, on a miss, the resolver: what to do with this call.
  // `may_resize`: an out= of the wrong shape may be resized first (not on host aliases).
  MissOutcome find_or_resolve(const torch::jit::Stack& stack, CallSignature* sig, bool may_resize = false);
  void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                torch::jit::Stack* stack, const char* reason);
  // Eager's own kernel for this call: the device's native kernel, or ATen's CPU kernel
  // on aliases of a host-memory device's tensors (else the fallback's error).
  void run_eager(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
                 const char* reason);
  // Runs the artifact and pushes its outputs; false, with the stack untouched, when the
  // kernel raised one of its own checks (eager's kernel then runs the call: kernel_error).
  bool try_run_and_push(const Artifact& artifact, const CallSignature& sig,
                        torch::jit::Stack* stack, std::string* error);
  // After a compiled kernel raised: eager's kernel runs the call, so the caller gets
  // eager's exception (IndexError: index out of range in self) or eager's result.
  void kernel_error(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                    torch::jit::Stack* stack, const std::string& error);
  // out= overloads: the functional op's kernel, then copy into the (resized) outs.
  // Declines (false, stack untouched) when an out's dtype or device differs from the result's.
  bool run_out_variant(torch::jit::Stack* stack);
  // A device with host memory (OpState::host_aliases) has the CPU as its target. A CPU
  // kernel that must run as is (a compiled kernel's extern call, an op whose output
  // shape depends on values) runs on zero-copy CPU aliases of its tensors.
  void run_on_cpu_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack);
  // The kernel the key had before eagerc (OpState::native). On a device whose memory has a
  // home, a composite that picks its backend by device type (convolution_backward ->
  // convolution_backward_overrideable) raises NotImplementedError: the home's kernel then
  // runs the call on aliases, as ATen would run it on the home device.
  void run_native(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
  // Whether a call no compiled kernel serves runs the home's ATen kernel on aliases
  // before OpState::native: aliases on, the home has a kernel for the op, and native is a
  // CompositeExplicitAutograd kernel (OpState::native_is_explicit_composite), not the
  // device's own. Eager on the home device runs that kernel, whatever the layout.
  bool home_before_native(const c10::OperatorHandle& op) const;
  // A miss whose kernel compiles in the background: served by what exists already.
  void run_interim(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
  // Compiled kernels that call ATen CPU functions (mm, convolution) get aliases too.
  void compiled_on_cpu_aliases(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                               torch::jit::Stack* stack);
  void restore_device_outputs(const c10::SmallVector<c10::IValue, 8>& original,
                              c10::Device device, size_t num_returns, torch::jit::Stack* stack);
  void run_and_push(const Artifact& artifact, const CallSignature& sig,
                    torch::jit::Stack* stack);

  std::shared_ptr<OpState> state_;
  // Integer division ops: the argument holding the divisor (-1 for other ops). A compiled
  // integer division by zero traps (SIGFPE) or raises with a generated file's name;
  // such a call goes to eager's kernel, which raises eager's ZeroDivisionError.
  int divisor_arg_ = -1;
  // Whose shape logic resizes this op's out= before its kernel runs (csrc/out_forms.h).
  OutShape out_shape_ = OutShape::None;
};

// Depth of eagerc activity on this thread. Inside a compiled kernel, a compile
// or a native fallback, ops dispatched to eagerc's holders run natively: a
// kernel's own extern calls (mm_out, empty_strided) must not recurse into eagerc.
// Calls a function on every defined tensor of argument `v` (a tensor or a tensor list).
template <typename F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) f(v.toTensor());
  } else if (v.isTensorList() || v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
    }
  }
}

struct ActivityGuard {
  ActivityGuard();
  ~ActivityGuard();
  static bool active();
};

// The same, for a thread that compiles outside a miss (background compiles): eager's
// reference run and tracing must reach native kernels there too.
void enter_activity();
void exit_activity();

// A result of the home device's kernel handed back as a tensor of `device` over the same
// memory (result_on_device: a fresh output's memory becomes the device's, counted in its
// statistics; pass the result by std::move so that it can); raises NotImplementedError for
// a result without memory to share (sparse, quantized, a ZeroTensor). `op` names the op.
at::Tensor device_result(at::Tensor t, c10::Device device, const std::string& op);

// A typed kernel's hit (csrc/unboxed_*.cpp): on an L1 hit for `sig` in `st`'s table, runs
// the artifact (counted as a hit), stores its first output in `result` and returns true;
// on a miss returns false, having run nothing (the caller hands the call to the boxed holder).
bool run_typed_hit(OpState& st, const CallSignature& sig, at::Tensor* result);

// Raises the error of Python type `kind` (the resolver's error_kind: IndexError, ValueError,
// TypeError, NotImplementedError, LinAlgError; anything else a RuntimeError) with `message`.
[[noreturn]] void raise_as(const std::string& kind, const std::string& message);

// Whether a device with no native kernels runs what neither a compiled kernel, aliases
// nor a vendor extern serve through the host round trip (default) or raises
// NotImplementedError (EAGERC_CPU_FALLBACK=0).
void set_cpu_fallback(bool enabled);
// Runs `op` through the host round trip unless it is off (then returns false): a call
// answered in the interim on a device whose memory has no home to alias.
bool run_host_round_trip_if_on(const c10::OperatorHandle& op, c10::DispatchKey key, size_t num_args,
                               torch::jit::Stack* stack);

// Whether an op a host-memory device cannot compile runs its memory home's ATen kernel
// (CPU for host memory) on zero-copy aliases (default) instead of raising: EAGERC_ALIAS_FALLBACK=0
// shows what a device without such a home would still need a hand-written kernel for.
void set_alias_fallback(bool enabled);
// Whether ops may run on aliases of their memory's home (set_alias_fallback).
bool alias_fallback_enabled();

// Whether the home of `key`'s memory (CPU for host memory, CUDA for GPU memory) has a
// kernel for `op`, so that aliases can serve it there: CUDA has none for histogram, whose
// calls on GPU memory take the rungs after aliases instead (csrc/fallback_ladder.cpp).
bool home_has_kernel(const c10::OperatorHandle& op, c10::DispatchKey key);

}  // namespace eagerc
