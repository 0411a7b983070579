// Device memory of the reference device: plain host memory, 64-byte aligned.
#include <cstdlib>
#include <cstring>

#include <c10/util/Exception.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

void free_host(void* ptr) {
  std::free(ptr);
}

class HostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device device(kDeviceType, 0);
    if (nbytes == 0) {
      // Like the CPU allocator: no memory, but the DataPtr still names the device.
      return {nullptr, nullptr, &free_host, device};
    }
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded);
    TORCH_CHECK(ptr != nullptr, "eagerc: out of host memory allocating ", nbytes, " bytes");
    return {ptr, ptr, &free_host, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_host;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Both sides are host memory, so a memcpy is the device-to-device copy.
    if (count > 0) std::memcpy(dest, src, count);
  }
};

HostAllocator g_allocator;

}  // namespace

c10::Allocator* host_allocator() {
  return &g_allocator;
}

void register_allocator() {
  c10::SetAllocator(kDeviceType, &g_allocator);
}

}  // namespace eagerc::device
