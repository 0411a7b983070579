#include "kernel_holder.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/TensorOptions.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <set>

#include "host_alias.h"
#include "out_forms.h"

namespace eagerc {
namespace {

thread_local int tls_depth = 0;

}  // namespace

ActivityGuard::ActivityGuard() { ++tls_depth; }
ActivityGuard::~ActivityGuard() { --tls_depth; }
bool ActivityGuard::active() { return tls_depth > 0; }
void enter_activity() { ++tls_depth; }
void exit_activity() { --tls_depth; }


bool run_typed_hit(OpState& st, const CallSignature& sig, at::Tensor* result) {
  const auto found = sig.unsupported ? KernelTable::Lookup{} : st.table.find(sig);
  if (!found.artifact) return false;
  st.counters.hits.fetch_add(1, std::memory_order_relaxed);
  c10::SmallVector<at::Tensor, 4> outs;
  {
    ActivityGuard guard;
    outs = found.artifact->run(sig);
  }
  *result = std::move(outs.at(0));
  return true;
}

// Only a plain strided tensor has memory to share: a sparse result, or a ZeroTensor
// (_efficientzerotensor: no memory at all; aliasing it crashed), cannot live on the device.
at::Tensor device_result(at::Tensor t, c10::Device device, const std::string& op) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      t.layout() == c10::kStrided && !t._is_zerotensor() && !t.is_quantized(), "eagerc: ", op,
      " returned a ", t._is_zerotensor() ? std::string("ZeroTensor") : c10::str(t.layout(), " tensor"),
      " on ", t.device(), ", which the ", device.type(), " device cannot hold");
  return result_on_device(std::move(t), device);
}

namespace {

// The fallback reason of an op that would run on aliases of a home with no kernel for it.
constexpr const char* kNoHomeKernel =
    "the device's memory home has no kernel for it (CUDA has none for histogram)";

// Whether a call on a host-memory device also passes CPU tensors that are not 0-dim (a
// 0-dim CPU tensor is a scalar to most ops). Eager's device rules decide about such a
// call on a miss (eagerc/per_op/eager_rules.py); on CPU aliases the difference is invisible.
bool mixes_cpu_tensors(size_t n, const torch::jit::Stack& stack) {
  bool mixed = false;
  for (size_t i = stack.size() - n; i < stack.size() && !mixed; ++i) {
    for_each_tensor(stack[i], [&](const at::Tensor& t) { mixed = mixed || (t.is_cpu() && t.dim() > 0); });
  }
  return mixed;
}

// Ops that divide integers by a tensor argument (always argument 1, `other`): Inductor's
// C++ truncdiv is a plain `a / b` (a zero kills the process with SIGFPE) and its floor
// division and modulo raise "ZeroDivisionError" with the generated header's path.
int integer_divisor_argument(const std::string& name) {
  static const std::set<std::string> ops = {
      "aten::div.Tensor_mode",      "aten::div_.Tensor_mode",     "aten::div.out_mode",
      "aten::floor_divide",         "aten::floor_divide_.Tensor", "aten::floor_divide.out",
      "aten::remainder.Tensor",     "aten::remainder_.Tensor",    "aten::remainder.Tensor_out",
      "aten::remainder.Scalar_Tensor", "aten::remainder.Scalar_Tensor_out",
      "aten::fmod.Tensor",          "aten::fmod_.Tensor",         "aten::fmod.Tensor_out"};
  return ops.count(name) ? 1 : -1;
}

template <typename T>
bool strided_has_zero(const T* data, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  const int64_t dim = static_cast<int64_t>(sizes.size());
  if (dim == 0) return *data == T(0);
  // Odometer over all but the innermost dim; the innermost is a plain strided loop.
  c10::SmallVector<int64_t, 8> index(dim, 0);
  const int64_t inner = sizes[dim - 1], step = strides[dim - 1];
  while (true) {
    int64_t offset = 0;
    for (int64_t d = 0; d < dim - 1; ++d) offset += index[d] * strides[d];
    const T* row = data + offset;
    for (int64_t i = 0; i < inner; ++i) {
      if (row[i * step] == T(0)) return true;
    }
    int64_t d = dim - 2;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d < 0) return false;
  }
}

// Whether an integer (or bool) tensor in host memory holds a zero. A tensor in GPU
// memory is not read: no GPU integer division traps.
bool integer_tensor_has_zero(const c10::IValue& v) {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || t.numel() == 0 || !c10::isIntegralType(t.scalar_type(), /*includeBool=*/true)) {
    return false;
  }
  if (!t.is_cpu() && !memory_home(t.device()).is_cpu()) return false;
  const char* base = static_cast<const char*>(t.storage().data()) + t.storage_offset() * t.element_size();
  switch (t.scalar_type()) {
#define EAGERC_HAS_ZERO(T, name) \
    case c10::ScalarType::name: return strided_has_zero(reinterpret_cast<const T*>(base), t.sizes(), t.strides());
    AT_FORALL_INT_TYPES(EAGERC_HAS_ZERO)
#undef EAGERC_HAS_ZERO
    case c10::ScalarType::Bool: return strided_has_zero(reinterpret_cast<const bool*>(base), t.sizes(), t.strides());
    case c10::ScalarType::UInt16: return strided_has_zero(reinterpret_cast<const uint16_t*>(base), t.sizes(), t.strides());
    case c10::ScalarType::UInt32: return strided_has_zero(reinterpret_cast<const uint32_t*>(base), t.sizes(), t.strides());
    case c10::ScalarType::UInt64: return strided_has_zero(reinterpret_cast<const uint64_t*>(base), t.sizes(), t.strides());
    default: return false;
  }
}

// A compiled kernel's error message names the generated function and file
// ("cpp_fused_0, /tmp/.../x.cpp:44, index out of bounds: ..."): only what it says is kept.
std::string without_generated_location(const std::string& message) {
  std::string text = message;
  const size_t cpp = text.find(".cpp:");
  const size_t h = text.find(".h:");
  const size_t at = std::min(cpp, h);
  if (at != std::string::npos) {
    const size_t comma = text.find(", ", at);
    if (comma != std::string::npos) text = text.substr(comma + 2);
  }
  return text;
}

}  // namespace

[[noreturn]] void raise_as(const std::string& kind, const std::string& message) {
  if (kind == "IndexError") C10_THROW_ERROR(IndexError, message);
  if (kind == "ValueError") C10_THROW_ERROR(ValueError, message);
  if (kind == "TypeError") C10_THROW_ERROR(TypeError, message);
  if (kind == "NotImplementedError") C10_THROW_ERROR(NotImplementedError, message);
  if (kind == "LinAlgError") C10_THROW_ERROR(LinAlgError, message);
  C10_THROW_ERROR(Error, message);
}


KernelHolder::KernelHolder(std::shared_ptr<OpState> state)
    : state_(std::move(state)),
      divisor_arg_(integer_divisor_argument(state_->name)),
      out_shape_(out_shape_kind(state_->name, state_->out_args)) {}

void KernelHolder::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                              torch::jit::Stack* stack) {
  OpState& st = *state_;
  if (ActivityGuard::active() && st.native && !home_before_native(op)) {
    fallback(op, ks, stack, nullptr);
    return;
  }
  if (C10_UNLIKELY(divisor_arg_ >= 0) &&
      integer_tensor_has_zero((*stack)[stack->size() - st.plan.kinds.size() + divisor_arg_])) {
    run_eager(op, ks, stack, "an integer division by zero: eager's kernel raises");
    return;
  }
  // A factory's out= (torch.arange(n) passes an empty one) is resized first, as eager's
  // kernel would resize it; the kernel compiled for outs of the result's shape writes it.
  if (C10_UNLIKELY(out_shape_ != OutShape::None && out_shape_ != OutShape::Meta)) {
    resize_outs_as_eager(op, out_shape_, st.out_args, st.plan.kinds.size(), *stack);
  }
  if (st.plan.writes) {
    // A written argument that is the very view of an input (x.mul_(x), logical_not_'s
    // out=self) is what an elementwise kernel reads and writes at the same index: the
    // compiled kernel serves it. Any other overlap is eager's kernel's to raise or handle.
    const WriteOverlap overlap = written_overlap(st.plan, *stack);
    if (overlap == WriteOverlap::Other ||
        (overlap == WriteOverlap::SameView && !op.hasTag(at::Tag::pointwise))) {
      run_eager(op, ks, stack, "an output overlaps an input: eager's own kernel runs it");
      return;
    }
  }
  if (st.functional && st.functional_served && !st.run_on_aliases && !ActivityGuard::active() &&
      run_out_variant(stack)) {
    return;
  }
  if (st.host_aliases) {
    if (st.run_on_aliases && !ActivityGuard::active() &&
        !alias_fallback_enabled()) {
      // Aliases off: an op no compiled kernel can serve takes a vendor device's last rungs.
      fallback(op, ks, stack, "an output whose shape depends on values, or a result eagerc "
                              "cannot return");
      return;
    }
    if (ActivityGuard::active() || st.run_on_aliases) {
      if (home_has_kernel(op, st.dispatch_key)) {
        run_on_cpu_aliases(op, stack);
      } else {
        fallback(op, ks, stack, kNoHomeKernel);
      }
      return;
    }
    if (st.compiled_on_host_aliases.load(std::memory_order_relaxed) &&
        !mixes_cpu_tensors(st.plan.kinds.size(), *stack)) {
      compiled_on_cpu_aliases(op, ks, stack);
      return;
    }
  }
  // One signature buffer per thread: its strings and vectors keep their
  // capacity, so a hit allocates nothing for the key.
  thread_local CallSignature sig;
  MissOutcome outcome = find_or_resolve(*stack, &sig, /*may_resize=*/true);
  switch (outcome.next) {
    case MissOutcome::Next::Run: {
      std::string error;
      if (!try_run_and_push(*outcome.artifact, sig, stack, &error)) kernel_error(op, ks, stack, error);
      return;
    }
    case MissOutcome::Next::RunOnHostAliases:
      compiled_on_cpu_aliases(op, ks, stack);
      return;
    case MissOutcome::Next::Fallback:
      fallback(op, ks, stack, outcome.reason.c_str());
      return;
    case MissOutcome::Next::Interim:
      run_interim(op, ks, stack);
      return;
    case MissOutcome::Next::Raise:
      raise_as(outcome.error_kind, outcome.reason);
  }
}

void KernelHolder::run_interim(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                               torch::jit::Stack* stack) {
  OpState& st = *state_;
  st.counters.interim.fetch_add(1, std::memory_order_relaxed);
  if (st.native && !home_before_native(op)) {
    ActivityGuard guard;
    run_native(op, ks, stack);  // the device's own kernel, or a decomposition the key had
    return;
  }
  if (st.host_aliases && alias_fallback_enabled() && home_has_kernel(op, st.dispatch_key)) {
    // The memory's home device runs its own ATen kernel on zero-copy aliases (before a
    // CompositeExplicitAutograd native: math_group_norm views a channels-last X).
    run_on_cpu_aliases(op, stack);
    return;
  }
  // No home to alias (a vendor's device, or aliases off): the host round trip, counted
  // as interim only (it serves the call until the kernel is compiled, not for good).
  if (run_host_round_trip_if_on(op, st.dispatch_key, st.plan.kinds.size(), stack)) return;
  fallback(op, ks, stack, "compiling in the background and no existing kernel can serve it");
}

void KernelHolder::run_eager(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                             torch::jit::Stack* stack, const char* reason) {
  OpState& st = *state_;
  if ((!st.native || home_before_native(op)) && st.host_aliases &&
      home_has_kernel(op, st.dispatch_key)) {
    // ATen's CPU kernel on zero-copy aliases: counted as aliased, like other such calls.
    st.counters.aliased.fetch_add(1, std::memory_order_relaxed);
    run_on_cpu_aliases(op, stack);
    return;
  }
  // The native kernel (override mode), else the new device's error.
  fallback(op, ks, stack, reason);
}

bool KernelHolder::try_run_and_push(const Artifact& artifact, const CallSignature& sig,
                                    torch::jit::Stack* stack, std::string* error) {
  try {
    run_and_push(artifact, sig, stack);  // raises before it touches the stack
    return true;
  } catch (const c10::OutOfMemoryError&) {
    throw;  // native eager's own exception (Artifact::run)
  } catch (const c10::Error& e) {
    *error = e.what_without_backtrace();
    return false;
  } catch (const std::exception& e) {  // generated code's checks throw std::runtime_error
    *error = e.what();
    return false;
  }
}

void KernelHolder::kernel_error(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                torch::jit::Stack* stack, const std::string& error) {
  OpState& st = *state_;
  // A compiled kernel checks what eager checks only in part (index bounds, an integer
  // division by zero) and words it as its generated code ("cpp_fused_0, <file>.cpp:44,
  // index out of bounds: 0 <= tmp7 < ks2"): eager's kernel runs the call again and raises
  // its own exception (IndexError: index out of range in self), or returns its result.
  // An in-place call may have written part of its output before the check fired; eager
  // raises for such a call all the same (the check is on inputs it does not write).
  if (st.native || st.host_aliases) {
    run_eager(op, ks, stack, "a compiled kernel raised: eager's kernel ran the call");
    return;
  }
  // A device with no kernels of its own: the kernel's message, without generated names.
  C10_THROW_ERROR(Error, without_generated_location(error));
}

MissOutcome KernelHolder::find_or_resolve(const torch::jit::Stack& stack, CallSignature* sig,
                                          bool may_resize) {
  OpState& st = *state_;
  compute_signature(st.plan, stack, st.specialize_values.load(std::memory_order_relaxed), sig);
  if (sig->unsupported) return {MissOutcome::Next::Fallback, nullptr, sig->unsupported};
  auto found = st.table.find(*sig);
  // An out= of another shape than the result's (no kernel has its signature; an out= op
  // whose functional form is served gets here when its out's dtype differs): resized as
  // eager's Meta kernel resizes it (warning included), then looked up again. Not on host
  // aliases: resizing an alias would not resize the device's tensor.
  if (!found.artifact && may_resize && out_shape_ == OutShape::Meta &&
      resize_outs_as_eager(st.op, out_shape_, st.out_args, st.plan.kinds.size(), stack)) {
    compute_signature(st.plan, stack, st.specialize_values.load(std::memory_order_relaxed), sig);
    if (sig->unsupported) return {MissOutcome::Next::Fallback, nullptr, sig->unsupported};
    found = st.table.find(*sig);
  }
  if (found.fallback) return {MissOutcome::Next::Fallback, nullptr, *found.fallback};
  if (found.artifact) {
    st.counters.hits.fetch_add(1, std::memory_order_relaxed);
    return {MissOutcome::Next::Run, found.artifact, ""};
  }
  MissOutcome outcome = resolve_miss(st, stack, sig);
  // A call sent on to the home's aliases is looked up again there, where it counts as the
  // hit or miss it is: one call, one count.
  if (outcome.next != MissOutcome::Next::RunOnHostAliases) {
    st.counters.misses.fetch_add(1, std::memory_order_relaxed);
  }
  return outcome;
}

bool KernelHolder::run_out_variant(torch::jit::Stack* stack) {
  OpState& st = *state_;
  const size_t n = st.plan.kinds.size();
  c10::SmallVector<c10::IValue, 8> args(stack->end() - n, stack->end());
  torch::jit::Stack call;
  for (size_t i = 0; i < n; ++i) {
    if (std::find(st.out_args.begin(), st.out_args.end(), static_cast<int>(i)) == st.out_args.end()) {
      call.push_back(args[i]);
    }
  }
  st.functional->callBoxed(&call);  // dispatched: its own compiled kernel serves it
  for (size_t r = 0; r < st.out_args.size(); ++r) {
    const c10::IValue& out = args[st.out_args[r]];
    if (!out.isTensor() || !call[r].isTensor()) return false;
    const at::Tensor& result = call[r].toTensor();
    // An out of another dtype or device follows the out= op's own rules (a cast eager
    // allows or an error it raises): the out= op itself serves that call.
    if (out.toTensor().scalar_type() != result.scalar_type() ||
        out.toTensor().device() != result.device()) {
      return false;
    }
  }
  torch::jit::drop(*stack, n);
  st.counters.hits.fetch_add(1, std::memory_order_relaxed);
  for (size_t r = 0; r < st.out_args.size(); ++r) {
    const at::Tensor& out = args[st.out_args[r]].toTensor();
    const at::Tensor& result = call[r].toTensor();
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
  }
  for (int index : st.out_args) stack->push_back(args[index]);
  return true;
}

void KernelHolder::run_and_push(const Artifact& artifact, const CallSignature& sig,
                                torch::jit::Stack* stack) {
  const OpPlan& plan = state_->plan;
  c10::SmallVector<at::Tensor, 4> outs;
  {
    ActivityGuard guard;
    outs = artifact.run(sig);
  }
  const size_t n = plan.kinds.size();
  const size_t base = stack->size() - n;
  if (plan.returns_tensor_list) {
    c10::List<at::Tensor> list;
    list.reserve(outs.size());
    for (auto& t : outs) list.push_back(std::move(t));
    torch::jit::drop(*stack, n);
    stack->emplace_back(std::move(list));
    return;
  }
  // Returns that alias an argument (in-place self, out=) are that argument:
  // the kernel wrote into it, and the caller must get the same tensor back.
  c10::SmallVector<c10::IValue, 4> rets;
  size_t next = 0;
  for (size_t r = 0; r < plan.num_returns; ++r) {
    int alias = plan.return_alias[r];
    if (alias >= 0) rets.push_back((*stack)[base + alias]);
    else rets.emplace_back(std::move(outs[next++]));
  }
  torch::jit::drop(*stack, n);
  for (auto& v : rets) stack->push_back(std::move(v));
}

}  // namespace eagerc
