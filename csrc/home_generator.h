// A device generator whose state is a generator of its memory's home (host_alias.h).
//
// A random op the holder runs on home aliases (ATen's CPU or CUDA kernel) accepts only a
// generator of the home's type. A device whose generators keep their state in such a
// home generator implements this interface on its GeneratorImpl; swap_to_cpu_aliases
// then hands the kernel that home generator, so the kernel draws from, and advances, the
// caller's generator (the eagerc device's generators: csrc/device/hooks.cpp).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/stack.h>

namespace eagerc {

class HomeGenerator {
 public:
  virtual ~HomeGenerator() = default;
  // The home generator (CPU or CUDA) that holds this generator's state.
  virtual const at::Generator& home() const = 0;
};

// `g`'s home generator where `g` keeps its state in one, else `g` itself.
inline at::Generator home_of(const at::Generator& g) {
  if (!g.defined()) return g;
  const auto* keeper = dynamic_cast<const HomeGenerator*>(g.unsafeGetGeneratorImpl());
  return keeper ? keeper->home() : g;
}

// For the host round trip (CPU kernels on copies): the call's last `n` stack entries that
// are generators keeping their state in a CPU generator are replaced by it. A generator
// whose home is not the CPU stays, and the CPU kernel refuses it as eager would.
inline void cpu_home_generators(size_t n, torch::jit::Stack* stack) {
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (!v.isGenerator()) continue;
    at::Generator home = home_of(v.toGenerator());
    if (home.defined() && home.device().is_cpu()) v = home;
  }
}

}  // namespace eagerc
