#include "home_allocations.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>

#include "host_alias.h"

namespace eagerc {
namespace {

// The allocator of the device whose call this thread is serving (null: none).
thread_local c10::Allocator* tls_device_allocator = nullptr;

// The CPU allocator: the device's memory, re-tagged as CPU memory, while a call of the
// device runs on this thread (HomeAllocationsOnDevice); else the CPU allocator it replaced.
// The device's deleter stays with each block, so a block is freed to the device's
// allocator wherever and whenever its last tensor dies.
class HomeAllocator final : public c10::Allocator {
 public:
  explicit HomeAllocator(c10::Allocator* cpu) : cpu_(cpu) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (c10::Allocator* device = tls_device_allocator) {
      c10::DataPtr ptr = device->allocate(nbytes);
      ptr.unsafe_set_device(c10::Device(c10::kCPU));
      return ptr;
    }
    return cpu_->allocate(nbytes);
  }

  // raw_allocate's blocks are freed with this deleter: ATen's CPU kernels do not allocate
  // raw blocks, so only the CPU allocator's own blocks ever reach it.
  c10::DeleterFnPtr raw_deleter() const override { return cpu_->raw_deleter(); }

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
