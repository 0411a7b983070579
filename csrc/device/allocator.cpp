// Device memory of the reference device: 64-byte-aligned host memory (the default), or
// GPU memory from PyTorch's CUDA caching allocator (EAGERC_BACKING=cuda: eagerc:N's
// memory on cuda:N, the current device's), tagged with the eagerc device either way. Nothing here needs CUDA headers: the CUDA allocator and copies
// are reached through c10's device-generic registries.
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/util/Exception.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

std::atomic<c10::DeviceType> g_backing{c10::DeviceType::CPU};

// Freed blocks of host memory, kept by size for the next allocation of that size. A
// model's forward frees and allocates the same sizes every step; glibc's malloc serves
// them from its bins and, when small frees (tensor and storage objects) sit in its fast
// bins, consolidates those on each larger request: _int_malloc, _int_free and
// malloc_consolidate were the largest part of the device's extra time per op in perf.
// Bounded: blocks above kMaxCachedBlock, and blocks beyond the limit in all (256 MiB; 0
// keeps none), go back to malloc; empty_cache() (torch.eagerc.empty_cache) returns every
// cached block.
class BlockCache {
 public:
  static constexpr size_t kMaxCachedBlock = size_t{16} << 20;

  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(bytes);
    if (it == blocks_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return block;
  }

  // False when the block is not kept (the caller frees it).
  bool give(void* block, size_t bytes) {
    if (bytes > kMaxCachedBlock) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + bytes > limit_) return false;
    blocks_[bytes].push_back(block);
    cached_ += bytes;
    return true;
  }

  size_t release_all() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    size_t released = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(blocks_);
      released = cached_;
      cached_ = 0;
    }
    for (auto& [bytes, list] : blocks) {
      for (void* block : list) std::free(block);
    }
    return released;
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

  void set_limit(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = bytes;
    }
    release_all();
  }

 private:
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> blocks_;  // block size -> free blocks
  size_t cached_ = 0;
  size_t limit_ = size_t{256} << 20;
};

// Never destroyed: tensors may be freed during interpreter shutdown.
BlockCache& block_cache() {
  static auto* cache = new BlockCache();
  return *cache;
}

// A block is [header | data]: the header (one alignment unit, so the data stays aligned)
// holds the block's size, which the deleter needs to file it under; the DataPtr's
// context is the data pointer, as for a plain malloc'd buffer.
constexpr size_t kHeader = kAlignment;

void* allocate_block(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment + kHeader;
  void* block = block_cache().take(rounded);
  if (!block) {
    block = std::aligned_alloc(kAlignment, rounded);
    // OutOfMemoryError, as CUDA's allocator raises: torch.OutOfMemoryError in Python, and a
    // compiled kernel's failed allocation reaches the user as it is (KernelHolder).
    TORCH_CHECK_WITH(OutOfMemoryError, block != nullptr, "eagerc: out of host memory allocating ", nbytes, " bytes");
    *static_cast<size_t*>(block) = rounded;
  }
  return static_cast<char*>(block) + kHeader;
}

void free_host(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeader;
  if (!block_cache().give(block, *static_cast<size_t*>(block))) std::free(block);
}

class DeviceAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (g_backing.load() == c10::DeviceType::CUDA) {
      // The caching allocator's block on the current GPU (the current eagerc device:
      // guard.cpp; the runtime's allocation ops set it from their device argument),
      // re-tagged with that index: its deleter frees by pointer.
      c10::DataPtr inner = c10::GetAllocator(c10::DeviceType::CUDA)->allocate(nbytes);
      const c10::Device device(kDeviceType, inner.device().index());
      void* data = inner.get();
      c10::DeleterFnPtr deleter = inner.get_deleter();
      void* context = inner.release_context();
      return {data, context, deleter, device};
    }
    const c10::Device device(kDeviceType, 0);
    if (nbytes == 0) {
      // Like the CPU allocator: no memory, but the DataPtr still names the device.
      return {nullptr, nullptr, &free_host, device};
    }
    void* ptr = allocate_block(nbytes);
    return {ptr, ptr, &free_host, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    if (g_backing.load() == c10::DeviceType::CUDA) {
      return c10::GetAllocator(c10::DeviceType::CUDA)->raw_deleter();
    }
    return &free_host;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    copy_bytes(dest, src, count);
  }
};

DeviceAllocator g_allocator;

}  // namespace

void set_backing(c10::DeviceType backing) {
  TORCH_CHECK(backing == c10::DeviceType::CPU || backing == c10::DeviceType::CUDA,
              "eagerc: the device's memory is host memory or CUDA memory, got ", backing);
  g_backing.store(backing);
}

c10::DeviceType backing() {
  return g_backing.load();
}

void copy_bytes(void* dest, const void* src, size_t count, c10::DeviceIndex index) {
  if (count == 0) return;
  if (g_backing.load() == c10::DeviceType::CPU) {
    std::memcpy(dest, src, count);  // host memory: a memcpy is the device-to-device copy
    return;
  }
  // GPU memory: the CUDA copy kernel on byte views of both buffers (on one GPU's stream;
  // the copy reads or writes another GPU's memory through unified addressing if need be).
  const c10::Device gpu(c10::DeviceType::CUDA, index >= 0 ? index : current_index());
  c10::DeviceGuard guard(gpu);
  auto bytes = [&](void* p) {
    return at::for_blob(p, {static_cast<int64_t>(count)})
        .options(at::TensorOptions().dtype(at::kByte).device(gpu))
        .target_device(gpu)
        .make_tensor();
  };
  bytes(dest).copy_(bytes(const_cast<void*>(src)));
}

size_t empty_cache() {
  return block_cache().release_all();
}

size_t cached_bytes() {
  return block_cache().cached_bytes();
}

void set_cache_limit(size_t bytes) {
  block_cache().set_limit(bytes);
}

c10::Allocator* host_allocator() {
  return &g_allocator;
}

void register_allocator() {
  c10::SetAllocator(kDeviceType, &g_allocator);
}

}  // namespace eagerc::device
