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
  // The first variant under `sig.key` whose guard passes, or null. Lock-free for
  // readers apart from a shared lock; safe to call from any thread.
  const Artifact* find(const CallSignature& sig) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = map_.find(sig.key);
    if (it == map_.end()) return nullptr;
    for (const Artifact* a : it->second) {
      if (a->guard(sig)) return a;
    }
    return nullptr;
  }

  // Variant ids already present for a key (the resolver skips those).
  std::vector<std::string> variant_ids(const std::string& key) const;

  // Adds a variant unless one with the same id is there.
  void insert(const std::string& key, const Artifact* artifact);

  size_t size() const;
  void clear();

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::vector<const Artifact*>> map_;
};

}  // namespace eagerc
