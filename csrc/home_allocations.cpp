#include "home_allocations.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_map>

#include "host_alias.h"

namespace eagerc {
namespace {

// The allocator of the device whose call this thread is serving (null: none).
thread_local c10::Allocator* tls_device_allocator = nullptr;

// The device's blocks handed out as CPU memory, by context, with the device's deleter.
// ATen's oneDNN (ideep) allocates its scratch with the CPU allocator's raw_allocate and frees
// it with raw_deleter(), which must then tell the device's blocks from the CPU allocator's.
struct DeviceBlocks {
  std::mutex mu;
  std::unordered_map<void*, c10::DeleterFnPtr> deleters;
};

DeviceBlocks& device_blocks() {
  static auto* blocks = new DeviceBlocks();  // never destroyed: tensors die at exit too
  return *blocks;
}

// The device's deleter of `context`, taken out of the registry (null: not a device block).
c10::DeleterFnPtr take_device_deleter(void* context) {
  DeviceBlocks& blocks = device_blocks();
  std::lock_guard<std::mutex> lock(blocks.mu);
  auto it = blocks.deleters.find(context);
  if (it == blocks.deleters.end()) return nullptr;
  const c10::DeleterFnPtr deleter = it->second;
  blocks.deleters.erase(it);
  return deleter;
}

void free_device_block(void* context) {
  if (c10::DeleterFnPtr deleter = take_device_deleter(context)) deleter(context);
}

c10::DeleterFnPtr g_cpu_raw_deleter = nullptr;

void free_raw(void* ptr) {
  if (c10::DeleterFnPtr deleter = take_device_deleter(ptr)) {
    deleter(ptr);
  } else {
    g_cpu_raw_deleter(ptr);
  }
}

// The CPU allocator: the device's memory, re-tagged as CPU memory, while a call of the
// device runs on this thread (HomeAllocationsOnDevice); else the CPU allocator it replaced.
// A device block goes back to the device's deleter wherever and whenever its last user
// frees it.
class HomeAllocator final : public c10::Allocator {
 public:
  explicit HomeAllocator(c10::Allocator* cpu) : cpu_(cpu) { g_cpu_raw_deleter = cpu->raw_deleter(); }

  c10::DataPtr allocate(size_t nbytes) override {
    c10::Allocator* device = tls_device_allocator;
    if (device == nullptr) return cpu_->allocate(nbytes);
    c10::DataPtr ptr = device->allocate(nbytes);
    void* data = ptr.get();
    if (data == nullptr) {  // no bytes: nothing to free
      ptr.unsafe_set_device(c10::Device(c10::kCPU));
      return ptr;
    }
    const c10::DeleterFnPtr deleter = ptr.get_deleter();
    void* context = ptr.release_context();
    {
      DeviceBlocks& blocks = device_blocks();
      std::lock_guard<std::mutex> lock(blocks.mu);
      blocks.deleters.emplace(context, deleter);
    }
    return {data, context, &free_device_block, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return g_cpu_raw_deleter ? &free_raw : nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    cpu_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* cpu_;
};

}  // namespace

void install_home_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* allocator = new HomeAllocator(c10::GetCPUAllocator());  // never destroyed
    c10::SetCPUAllocator(allocator);
  });
}

HomeAllocationsOnDevice::HomeAllocationsOnDevice(c10::Device device) : previous_(tls_device_allocator) {
  if (device.type() != c10::kCPU && has_other_home(device) && memory_home(device).is_cpu()) {
    tls_device_allocator = c10::GetAllocator(device.type());
  }
}

HomeAllocationsOnDevice::~HomeAllocationsOnDevice() { tls_device_allocator = previous_; }

}  // namespace eagerc
