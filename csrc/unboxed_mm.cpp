#include "unboxed_mm.h"

#include <ATen/core/stack.h>

#include "host_alias.h"
#include "kernel_holder.h"
#include "signature.h"

namespace eagerc {
namespace {

// A tensor of a device whose memory has a home device (host memory: CPU aliases; GPU
// memory: CUDA aliases, on which cuBLAS's shim runs).
bool on_aliased_device(const at::Tensor& t) {
  return t.defined() && has_other_home(t.device());
}

// What mm and addmm share: the hit path on the typed arguments, else the boxed holder.
class UnboxedMatmulBase {
 protected:
  explicit UnboxedMatmulBase(std::shared_ptr<OpState> state)
      : state_(state), boxed_(std::make_shared<KernelHolder>(std::move(state))) {}

  // On an L1 hit for the signature `fill` computes (from the tensors the artifact runs on:
  // `tensors`, the call's defined tensor arguments, or their CPU aliases), runs the
  // artifact, stores its result in `result` and returns true; otherwise false (the caller
  // then hands the call to the boxed holder), having run nothing.
  template <size_t N, typename Fill>
  bool try_hit(const std::array<const at::Tensor*, N>& tensors, Fill&& fill,
               at::Tensor* result) const {
    OpState& st = *state_;
    if (ActivityGuard::active() || st.run_on_aliases) return false;
    const bool specialize = st.specialize_values.load(std::memory_order_relaxed);
    thread_local CallSignature sig;
    if (!st.host_aliases) {
      // Override mode (CPU): the boxed holder's plain hit path.
      fill(tensors, specialize, &sig);
      return run_hit(sig, result);
    }
    const at::Tensor& first = *tensors[0];
    for (const at::Tensor* t : tensors) {
      if (!on_aliased_device(*t) || t->device() != first.device()) return false;
    }
    if (!st.compiled_on_host_aliases.load(std::memory_order_relaxed)) {
      // A kernel that calls no ATen CPU function runs on the device's own tensors.
      fill(tensors, specialize, &sig);
      return run_hit(sig, result);
    }
    // The boxed path's compiled_on_cpu_aliases, typed (on GPU memory: cuBLAS on CUDA
    // aliases), on this call site's reused aliases (ArgumentAliases).
    thread_local std::array<ReusedAlias, N> slots;
    const ArgumentAliases<N> aliases(slots, tensors);
    fill(aliases.get(), specialize, &sig);
    if (!run_hit(sig, result)) return false;
    at::Tensor& out = *result;
    if (out.defined() && out.device() == memory_home(first.device())) {
      out = device_result(std::move(out), first.device(), st.name);
    }
    return true;
  }

  bool run_hit(const CallSignature& sig, at::Tensor* result) const {
    return run_typed_hit(*state_, sig, result);
  }

  at::Tensor boxed(c10::DispatchKeySet ks, torch::jit::Stack&& stack) const {
    (*boxed_)(state_->op, ks, &stack);
    return std::move(stack.back()).toTensor();
  }

  std::shared_ptr<OpState> state_;
  std::shared_ptr<KernelHolder> boxed_;
};

class UnboxedMm : UnboxedMatmulBase {
 public:
  explicit UnboxedMm(std::shared_ptr<OpState> state) : UnboxedMatmulBase(std::move(state)) {}

  at::Tensor operator()(c10::DispatchKeySet ks, const at::Tensor& self,
                        const at::Tensor& mat2) const {
    at::Tensor result;
    if (self.defined() && mat2.defined() &&
        try_hit(std::array<const at::Tensor*, 2>{&self, &mat2},
                [](const std::array<const at::Tensor*, 2>& t, bool specialize, CallSignature* sig) {
                  compute_mm_signature(*t[0], *t[1], specialize, sig);
                },
                &result)) {
      return result;
    }
    torch::jit::Stack stack;
    stack.reserve(2);
    torch::jit::push(stack, self, mat2);
    return boxed(ks, std::move(stack));
  }
};

class UnboxedAddmm : UnboxedMatmulBase {
 public:
  explicit UnboxedAddmm(std::shared_ptr<OpState> state) : UnboxedMatmulBase(std::move(state)) {}

  at::Tensor operator()(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat1,
                        const at::Tensor& mat2, const c10::Scalar& beta,
                        const c10::Scalar& alpha) const {
    at::Tensor result;
    if (self.defined() && mat1.defined() && mat2.defined() && !beta.isSymbolic() &&
        !alpha.isSymbolic() &&
        try_hit(std::array<const at::Tensor*, 3>{&self, &mat1, &mat2},
                [&](const std::array<const at::Tensor*, 3>& t, bool specialize, CallSignature* sig) {
                  compute_addmm_signature(*t[0], *t[1], *t[2], beta, alpha, specialize, sig);
                },
                &result)) {
      return result;
    }
    torch::jit::Stack stack;
    stack.reserve(5);
    torch::jit::push(stack, self, mat1, mat2, beta, alpha);
    return boxed(ks, std::move(stack));
  }
};

}  // namespace

torch::CppFunction unboxed_mm_kernel(std::shared_ptr<OpState> state) {
  return torch::CppFunction(UnboxedMm(std::move(state)));
}

torch::CppFunction unboxed_addmm_kernel(std::shared_ptr<OpState> state) {
  return torch::CppFunction(UnboxedAddmm(std::move(state)));
}

}  // namespace eagerc
