// L1: the in-memory table of one operator's compiled kernels. A key (the call
// signature) can hold several variants, each valid under its own guard (for
// example a reduction compiled once for rows up to 4096 and once for longer).
#pragma once
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "artifact.h"

namespace eagerc {

class KernelTable {
 public:
  struct Lookup {
    const Artifact* artifact = nullptr;       // a variant whose guard passes
    const std::string* fallback = nullptr;    // or: this key is known not to compile
  };

  // The first variant under `sig.key` whose guard passes, or the recorded reason
  // why the key runs natively, or neither (a miss). Readers take a shared lock.
  Lookup find(const CallSignature& sig) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(sig.key);
    if (it != map_.end()) {
      for (const Artifact* a : it->second) {
        if (a->guard(sig)) return {a, nullptr};
      }
    }
    if (!fallbacks_.empty()) {
      auto f = fallbacks_.find(sig.key);
      if (f != fallbacks_.end()) return {nullptr, &f->second};
    }
    return {};
  }

  // Remembers that calls with this key cannot be compiled (they run natively
  // without asking Python again). Reason strings are never removed.
  void mark_fallback(const std::string& key, const std::string& reason);

  // Variant ids already present for a key (the resolver skips those).
  std::vector<std::string> variant_ids(const std::string& key) const;

  // Adds a variant unless one with the same id is there.
  void insert(const std::string& key, const Artifact* artifact);

  size_t size() const;
  void clear();

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::vector<const Artifact*>> map_;
  std::unordered_map<std::string, std::string> fallbacks_;
};

}  // namespace eagerc
