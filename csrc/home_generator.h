// A device generator whose state is a generator of its memory's home (host_alias.h).
//
// A random op the holder runs on home aliases (ATen's CPU or CUDA kernel) accepts only a
// generator of the home's type. A device whose generators keep their state in such a
// home generator implements this interface on its GeneratorImpl; swap_to_cpu_aliases
// then hands the kernel that home generator, so the kernel draws from, and advances, the
// caller's generator (the eagerc device's generators: csrc/device/hooks.cpp).
#pragma once

#include <ATen/core/Generator.h>

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

}  // namespace eagerc
