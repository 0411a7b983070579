// Pinned host memory of the reference device: torch's host allocator for it (Tensor.pin_memory(),
// DataLoader(pin_memory=True), torch.accelerator.empty_host_cache) and is_pinned()'s answer.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <c10/util/Exception.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

using c10::CachingAllocator::Stat;

// Pinned host memory: what Tensor.pin_memory() and DataLoader(pin_memory=True) allocate
// for the device, and what is_pinned() answers True for (torch asks the accelerator's
// hooks: hooks.cpp). Where a CUDA GPU is present (always on GPU memory) it is CUDA's
// page-locked memory from CUDA's caching host allocator, so a copy from it to the device
// with non_blocking=True is asynchronous on the current stream. Without one, the device's
// memory is host memory that its kernels read directly: pinned memory is then a separate
// 64-byte-aligned host block, kept apart from the device's own memory (it is a CPU tensor
// and counts in no device statistics), and pinned exactly while it lives.
bool cuda_pinned() {
  static const bool cuda = backing() == c10::DeviceType::CUDA || at::detail::getCUDAHooks().hasCUDA();
  return cuda;
}

// CUDA's caching host allocator: what CUDA's hooks pin with (no CUDA headers needed).
at::HostAllocator* cuda_host_allocator() {
  static auto* allocator = [] {
    auto* found = dynamic_cast<at::HostAllocator*>(at::detail::getCUDAHooks().getPinnedMemoryAllocator());
    TORCH_CHECK(found != nullptr, "eagerc: CUDA's pinned-memory allocator is not a caching host allocator");
    return found;
  }();
  return allocator;
}

class PinnedBlocks {
 public:
  void add(void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.emplace(data, bytes);
    increase(stats_.allocations, 1);
    increase(stats_.active_requests, 1);
    increase(stats_.allocated_bytes, bytes);
    increase(stats_.active_bytes, bytes);
    stats_.num_host_alloc += 1;
  }

  void remove(void* data) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(data);
    if (it == blocks_.end()) return;
    decrease(stats_.allocations, 1);
    decrease(stats_.active_requests, 1);
    decrease(stats_.allocated_bytes, it->second);
    decrease(stats_.active_bytes, it->second);
    stats_.num_host_free += 1;
    blocks_.erase(it);
  }

  bool contains(const void* data) {
    std::lock_guard<std::mutex> lock(mu_);
    return blocks_.count(const_cast<void*>(data)) != 0;
  }

  at::HostStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Stat* s : {&stats_.allocations, &stats_.active_requests, &stats_.allocated_bytes, &stats_.active_bytes}) {
      s->peak = s->current;
    }
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Stat* s : {&stats_.allocations, &stats_.active_requests, &stats_.allocated_bytes, &stats_.active_bytes}) {
      s->allocated = s->freed = 0;
    }
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

 private:
  std::mutex mu_;
  std::unordered_map<void*, size_t> blocks_;  // data -> bytes
  at::HostStats stats_;
};

// Never destroyed: pinned tensors may be freed during interpreter shutdown.
PinnedBlocks& pinned_blocks() {
  static auto* blocks = new PinnedBlocks();
  return *blocks;
}

void free_pinned(void* data) {
  if (data == nullptr) return;
  pinned_blocks().remove(data);
  std::free(data);
}

class PinnedAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (cuda_pinned()) return cuda_host_allocator()->allocate(nbytes);
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &free_pinned, cpu};
    const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, rounded);
    TORCH_CHECK_WITH(OutOfMemoryError, data != nullptr, "eagerc: out of host memory pinning ", nbytes, " bytes");
    pinned_blocks().add(data, rounded);
    return {data, data, &free_pinned, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return cuda_pinned() ? cuda_host_allocator()->raw_deleter() : &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  // A copy on host memory has finished when it returns: no event to wait for.
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    if (!cuda_pinned()) return pinned_blocks().contains(ptr);
    return cuda_host_allocator()->record_event(
        ptr, ctx, stream.device_type() == kDeviceType ? cuda_stream(stream) : stream);
  }

  // Without a GPU nothing is cached: a pinned block goes back to malloc when freed.
  void empty_cache() override {
    if (cuda_pinned()) cuda_host_allocator()->empty_cache();
  }

  at::HostStats get_stats() override {
    return cuda_pinned() ? cuda_host_allocator()->get_stats() : pinned_blocks().stats();
  }

  void reset_accumulated_stats() override {
    if (cuda_pinned()) {
      cuda_host_allocator()->reset_accumulated_stats();
    } else {
      pinned_blocks().reset_accumulated();
    }
  }

  void reset_peak_stats() override {
    if (cuda_pinned()) {
      cuda_host_allocator()->reset_peak_stats();
    } else {
      pinned_blocks().reset_peak();
    }
  }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

at::HostAllocator* pinned_allocator() {
  return &g_pinned_allocator;
}

bool is_pinned(const void* data) {
  if (cuda_pinned()) return at::detail::getCUDAHooks().isPinnedPtr(data);
  return data != nullptr && pinned_blocks().contains(data);
}

}  // namespace eagerc::device
