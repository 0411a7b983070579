// Device memory of the reference device: 64-byte-aligned host memory (the default), or
// GPU memory from PyTorch's CUDA caching allocator (EAGERC_BACKING=cuda: eagerc:N's
// memory on cuda:N, the current device's), tagged with the eagerc device either way. Nothing here needs CUDA headers: the CUDA allocator and copies
// are reached through c10's device-generic registries.
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/util/Exception.h>

#include "device/runtime.h"
#include "host_alias.h"

namespace eagerc::device {
namespace {

std::atomic<c10::DeviceType> g_backing{c10::DeviceType::CPU};

bool on_gpu() {
  return g_backing.load() == c10::DeviceType::CUDA;
}

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using device::decrease;  // one Stat's (runtime.h), next to the StatArray overloads below
using device::increase;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

// Blocks up to this size count in the small pool, as in CUDA's caching allocator.
constexpr size_t kSmallBlock = size_t{1} << 20;

// The aggregate entry and the block's pool (small or large), as CUDA's statistics are kept.
void increase(StatArray& stats, size_t amount, size_t block) {
  increase(stats[static_cast<size_t>(StatType::AGGREGATE)], amount);
  increase(stats[static_cast<size_t>(block <= kSmallBlock ? StatType::SMALL_POOL : StatType::LARGE_POOL)], amount);
}

void decrease(StatArray& stats, size_t amount, size_t block) {
  decrease(stats[static_cast<size_t>(StatType::AGGREGATE)], amount);
  decrease(stats[static_cast<size_t>(block <= kSmallBlock ? StatType::SMALL_POOL : StatType::LARGE_POOL)], amount);
}

void for_each_stat(DeviceStats& s, void (*fn)(Stat&)) {
  for (StatArray* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                           &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *array) fn(stat);
  }
  fn(s.oversize_allocations);
  fn(s.oversize_segments);
}

// A block's header: one alignment unit before its data (Header, below).
constexpr size_t kHeader = kAlignment;

// Home memory the device owns (adopt_home_memory): a CPU kernel's output, counted as a
// block of the device's for the bytes it holds, as allocate_block would have counted it, so
// a tensor's statistics do not depend on which path made it.
struct AdoptedBlock {
  c10::DataPtr memory;  // the CPU allocator's, freed by its own deleter
  size_t block;
  size_t requested;
};

// Host memory, with freed blocks kept by size for the next allocation of that size. A
// model's forward frees and allocates the same sizes every step; glibc's malloc serves
// them from its bins and, when small frees (tensor and storage objects) sit in its fast
// bins, consolidates those on each larger request: _int_malloc, _int_free and
// malloc_consolidate were the largest part of the device's extra time per op in perf.
// Bounded: blocks of more than kMaxCachedBlock of data, and blocks beyond the limit in all
// (256 MiB; 0 keeps none), go back to malloc; empty_cache() (torch.eagerc.empty_cache)
// returns every cached block.
//
// Its statistics are CUDA's caching allocator's, counted in whole blocks (the request
// rounded up to the alignment, plus the header): a block in use is allocated, active and
// reserved; a cached block is reserved only; a segment is one block from malloc. There is
// no splitting, so the inactive-split entries stay 0.
//
// Adopted blocks (home memory a CPU kernel allocated for a device call, adopt_home_memory)
// are kept and counted the same way, but only the CPU allocator that made one can reuse
// it: a request that finds only an adopted block of its size frees that block and takes a
// fresh one, and an adoption frees a kept block of its size. Either way the memory the
// device holds (reserved) is what reusing the block would have left it, as CUDA's
// allocator's numbers are when a freed tensor's memory serves the next of its size.
class HostPool {
 public:
  static constexpr size_t kMaxCachedBlock = size_t{16} << 20;  // of data (the header aside)

  // A block of `block` bytes for a request of `requested`: a cached one, or nullptr (the
  // caller mallocs one and calls added()). Either way the block is counted as in use.
  void* take(size_t block, size_t requested) {
    Dropped dropped;  // freed after the lock is released
    std::lock_guard<std::mutex> lock(mu_);
    void* found = nullptr;
    auto it = blocks_.find(block);
    if (it != blocks_.end() && !it->second.empty()) {
      found = it->second.back();
      it->second.pop_back();
      cached_ -= block;
    } else {
      drop_adopted(block, &dropped);
    }
    count_in_use(block, requested);
    return found;
  }

  // An adopted block now in use (adopt_home_memory): a segment of its own, as a block fresh
  // from malloc is, in place of a kept block of its size if there is one.
  void adopted(size_t block, size_t requested) {
    Dropped dropped;
    std::lock_guard<std::mutex> lock(mu_);
    if (!drop_adopted(block, &dropped)) drop_kept(block, &dropped);
    count_in_use(block, requested);
    increase(stats_.segment, 1, block);
    increase(stats_.reserved_bytes, block, block);
    stats_.num_device_alloc += 1;
  }

  // An adopted block freed: kept (true) or not (the caller frees it), as give() does.
  bool give_adopted(AdoptedBlock* adopted) {
    const size_t block = adopted->block;
    std::lock_guard<std::mutex> lock(mu_);
    count_freed(block, adopted->requested);
    if (keeps(block)) {
      adopted_[block].push_back(adopted);
      cached_ += block;
      return true;
    }
    released(block);
    return false;
  }

  // A block fresh from malloc (after take() answered nullptr).
  void added(size_t block) {
    std::lock_guard<std::mutex> lock(mu_);
    increase(stats_.segment, 1, block);
    increase(stats_.reserved_bytes, block, block);
    stats_.num_device_alloc += 1;
  }

  // A request malloc could not serve: `retried` says whether the cache was emptied and the
  // request tried again (a retry), or whether it failed after that too (an OOM).
  void failed(size_t block, size_t requested, bool retried) {
    std::lock_guard<std::mutex> lock(mu_);
    if (retried) {
      stats_.num_ooms += 1;
      decrease(stats_.allocation, 1, block);
      decrease(stats_.active, 1, block);
      decrease(stats_.allocated_bytes, block, block);
      decrease(stats_.active_bytes, block, block);
      decrease(stats_.requested_bytes, requested, block);
    } else {
      stats_.num_alloc_retries += 1;
    }
  }

  // False when the block is not kept (the caller frees it).
  bool give(void* data, size_t block, size_t requested) {
    std::lock_guard<std::mutex> lock(mu_);
    count_freed(block, requested);
    if (keeps(block)) {
      blocks_[block].push_back(data);
      cached_ += block;
      return true;
    }
    released(block);
    return false;
  }

  size_t release_all() {
    Dropped dropped;
    size_t freed = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.blocks.swap(blocks_);
      dropped.adopted.swap(adopted_);
      freed = cached_;
      cached_ = 0;
      for (auto& [bytes, list] : dropped.blocks) {
        for (size_t k = 0; k < list.size(); ++k) released(bytes);
      }
      for (auto& [bytes, list] : dropped.adopted) {
        for (size_t k = 0; k < list.size(); ++k) released(bytes);
      }
    }
    return freed;
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

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    for_each_stat(stats_, [](Stat& s) { s.peak = s.current; });
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mu_);
    for_each_stat(stats_, [](Stat& s) { s.allocated = s.freed = 0; });
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

 private:
  // Kept blocks taken out of the pool, freed when this goes out of scope (after mu_ is
  // released: an adopted block's deleter is the CPU allocator's, which may take locks).
  struct Dropped {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    std::unordered_map<size_t, std::vector<AdoptedBlock*>> adopted;
    Dropped() = default;
    Dropped(const Dropped&) = delete;
    Dropped& operator=(const Dropped&) = delete;
    ~Dropped() {
      for (auto& [bytes, list] : blocks) {
        for (void* block : list) std::free(block);
      }
      for (auto& [bytes, list] : adopted) {
        for (AdoptedBlock* block : list) delete block;
      }
    }
  };

  // The rest: mu_ held.
  void count_in_use(size_t block, size_t requested) {
    increase(stats_.allocation, 1, block);
    increase(stats_.active, 1, block);
    increase(stats_.allocated_bytes, block, block);
    increase(stats_.active_bytes, block, block);
    increase(stats_.requested_bytes, requested, block);
  }

  void count_freed(size_t block, size_t requested) {
    decrease(stats_.allocation, 1, block);
    decrease(stats_.active, 1, block);
    decrease(stats_.allocated_bytes, block, block);
    decrease(stats_.active_bytes, block, block);
    decrease(stats_.requested_bytes, requested, block);
  }

  bool keeps(size_t block) const {
    return block - kHeader <= kMaxCachedBlock && cached_ + block <= limit_;
  }

  // Each moves one kept block of size `block` (an adopted one; one of malloc) into
  // `dropped`, counted as gone back to its allocator; false when none is kept.
  bool drop_adopted(size_t block, Dropped* dropped) {
    return drop_one(adopted_, block, &dropped->adopted);
  }

  bool drop_kept(size_t block, Dropped* dropped) {
    return drop_one(blocks_, block, &dropped->blocks);
  }

  template <typename Kept>
  bool drop_one(Kept& kept, size_t block, Kept* to) {
    auto it = kept.find(block);
    if (it == kept.end() || it->second.empty()) return false;
    (*to)[block].push_back(it->second.back());
    it->second.pop_back();
    cached_ -= block;
    released(block);
    return true;
  }

  // A block going back to malloc or to the CPU allocator.
  void released(size_t block) {
    decrease(stats_.segment, 1, block);
    decrease(stats_.reserved_bytes, block, block);
    stats_.num_device_free += 1;
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> blocks_;  // block size -> free blocks
  std::unordered_map<size_t, std::vector<AdoptedBlock*>> adopted_;  // freed adopted blocks
  size_t cached_ = 0;
  size_t limit_ = size_t{256} << 20;
  DeviceStats stats_;
};

// Never destroyed: tensors may be freed during interpreter shutdown.
HostPool& host_pool() {
  static auto* pool = new HostPool();
  return *pool;
}

// A block is [header | data]: the header (kHeader, one alignment unit, so the data stays
// aligned) holds the block's size and the bytes requested, which the deleter needs to file
// and count it; the DataPtr's context is the data pointer, as for a plain malloc'd buffer.
struct Header {
  size_t block;
  size_t requested;
};
static_assert(sizeof(Header) <= kHeader);

void* allocate_block(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment + kHeader;
  void* block = host_pool().take(rounded, nbytes);
  if (!block) {
    block = std::aligned_alloc(kAlignment, rounded);
    if (block == nullptr) {
      // As CUDA's allocator does: return the cached blocks and try once more.
      host_pool().failed(rounded, nbytes, /*retried=*/false);
      host_pool().release_all();
      block = std::aligned_alloc(kAlignment, rounded);
      if (block == nullptr) host_pool().failed(rounded, nbytes, /*retried=*/true);
    }
    // OutOfMemoryError, as CUDA's allocator raises: torch.OutOfMemoryError in Python, and a
    // compiled kernel's failed allocation reaches the user as it is (KernelHolder).
    TORCH_CHECK_WITH(OutOfMemoryError, block != nullptr, "eagerc: out of host memory allocating ", nbytes, " bytes");
    host_pool().added(rounded);
  }
  *static_cast<Header*>(block) = {rounded, nbytes};
  return static_cast<char*>(block) + kHeader;
}

void free_host(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeader;
  const Header header = *static_cast<Header*>(block);
  if (!host_pool().give(block, header.block, header.requested)) std::free(block);
}

void free_adopted(void* context) {
  auto* adopted = static_cast<AdoptedBlock*>(context);
  if (!host_pool().give_adopted(adopted)) delete adopted;
}

// The device's HomeMemoryAdopter (host_alias.h): on host memory, the outputs of the CPU
// kernels a device call runs on aliases (ATen's kernel, a kernel compiled on aliases such as
// randn's, a background miss's interim answer) become the device's tensors with no copy.
c10::DataPtr adopt_home_memory(c10::DataPtr&& home_memory, size_t nbytes, c10::Device device) {
  TORCH_INTERNAL_ASSERT(!on_gpu() && home_memory.device().is_cpu(),
                        "eagerc: only host memory is adopted, got memory on ", home_memory.device());
  void* data = home_memory.get();
  const size_t block = (nbytes + kAlignment - 1) / kAlignment * kAlignment + kHeader;
  auto* adopted = new AdoptedBlock{std::move(home_memory), block, nbytes};
  host_pool().adopted(block, nbytes);
  return {data, adopted, &free_adopted, device};
}

// CUDA's caching allocator, through c10's registry (no CUDA headers).
c10::DeviceAllocator* cuda_allocator() {
  return c10::getDeviceAllocator(c10::DeviceType::CUDA);
}

c10::DeviceIndex resolved(c10::DeviceIndex index) {
  check_index(index);
  return index >= 0 ? index : current_index();
}

// The device's allocator is a c10::DeviceAllocator, so torch.accelerator's memory calls
// (empty_cache, memory_stats, memory_allocated, ...) reach it. On GPU memory each of them
// answers for cuda:N's caching allocator, which eagerc:N's memory comes from (its numbers
// include native CUDA tensors of the same process: they share that memory).
class EagercAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (on_gpu()) {
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
    if (on_gpu()) {
      return c10::GetAllocator(c10::DeviceType::CUDA)->raw_deleter();
    }
    return &free_host;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    copy_bytes(dest, src, count);
  }

  bool initialized() override {
    return !on_gpu() || cuda_allocator()->initialized();
  }

  void emptyCache(c10::MempoolId_t mempool_id) override {
    if (on_gpu()) {
      cuda_allocator()->emptyCache(mempool_id);
    } else {
      host_pool().release_all();
    }
  }

  // On host memory every kernel has finished when its call returns: nothing to wait for.
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (on_gpu()) cuda_allocator()->recordStream(ptr, cuda_stream(stream));
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const c10::DeviceIndex index = resolved(device);
    return on_gpu() ? cuda_allocator()->getDeviceStats(index) : host_pool().stats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    const c10::DeviceIndex index = resolved(device);
    if (on_gpu()) {
      cuda_allocator()->resetAccumulatedStats(index);
    } else {
      host_pool().reset_accumulated();
    }
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    const c10::DeviceIndex index = resolved(device);
    if (on_gpu()) {
      cuda_allocator()->resetPeakStats(index);
    } else {
      host_pool().reset_peak();
    }
  }

  // Host memory: the machine's available and total physical memory.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const c10::DeviceIndex index = resolved(device);
    if (on_gpu()) return cuda_allocator()->getMemoryInfo(index);
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return {static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
            static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page};
  }
};

EagercAllocator g_allocator;


}  // namespace

void set_backing(c10::DeviceType backing) {
  TORCH_CHECK(backing == c10::DeviceType::CPU || backing == c10::DeviceType::CUDA,
              "eagerc: the device's memory is host memory or CUDA memory, got ", backing);
  g_backing.store(backing);
  // GPU memory's home is CUDA, whose kernels allocate from the statistics' own allocator.
  if (backing != c10::DeviceType::CPU) set_home_memory_adopter(kDeviceType, nullptr);
}

c10::DeviceType backing() {
  return g_backing.load();
}

void copy_bytes(void* dest, const void* src, size_t count, c10::DeviceIndex index) {
  if (count == 0) return;
  if (!on_gpu()) {
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
  if (on_gpu()) {
    cuda_allocator()->emptyCache({0, 0});
    return 0;
  }
  return host_pool().release_all();
}

size_t cached_bytes() {
  return host_pool().cached_bytes();
}

void set_cache_limit(size_t bytes) {
  host_pool().set_limit(bytes);
}

c10::DeviceAllocator* host_allocator() {
  return &g_allocator;
}

void register_allocator() {
  c10::SetAllocator(kDeviceType, &g_allocator);
  // Host memory (the default): kernels on CPU aliases allocate with the CPU allocator, and
  // the device takes their outputs over. Only here, where PrivateUse1 is this device's:
  // another backend's PrivateUse1 keeps its own memory.
  if (!on_gpu()) set_home_memory_adopter(kDeviceType, &adopt_home_memory);
  at::setHostAllocator(kDeviceType, pinned_allocator());
}

}  // namespace eagerc::device
