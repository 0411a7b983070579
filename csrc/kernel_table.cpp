#include "kernel_table.h"

#include <mutex>

namespace eagerc {

std::vector<std::string> KernelTable::variant_ids(const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<std::string> ids;
  auto it = map_.find(key);
  if (it != map_.end()) {
    for (const Artifact* a : it->second) ids.push_back(a->variant_id());
  }
  return ids;
}

void KernelTable::insert(const std::string& key, const Artifact* artifact) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto& variants = map_[key];
  for (const Artifact* a : variants) {
    if (a->variant_id() == artifact->variant_id()) return;
  }
  variants.push_back(artifact);
}

void KernelTable::mark_fallback(const std::string& key, const std::string& reason) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  fallbacks_.emplace(key, reason);
}

size_t KernelTable::size() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  size_t n = 0;
  for (const auto& kv : map_) n += kv.second.size();
  return n;
}

void KernelTable::clear() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  map_.clear();
  fallbacks_.clear();
}

}  // namespace eagerc
