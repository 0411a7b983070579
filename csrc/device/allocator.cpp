// Device memory of the reference device: 64-byte-aligned host memory (the default), or
// GPU memory from PyTorch's CUDA caching allocator (EAGERC_BACKING=cuda), tagged with the
// eagerc device either way. Nothing here needs CUDA headers: the CUDA allocator and copies
// are reached through c10's device-generic registries.
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <c10/util/Exception.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

std::atomic<c10::DeviceType> g_backing{c10::DeviceType::CPU};

void free_host(void* ptr) {
  std::free(ptr);
}

const c10::Device kGpu(c10::DeviceType::CUDA, 0);

class DeviceAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device device(kDeviceType, 0);
    if (g_backing.load() == c10::DeviceType::CUDA) {
      // The caching allocator's block, re-tagged: its deleter frees by pointer.
      c10::DeviceGuard guard(kGpu);
      c10::DataPtr inner = c10::GetAllocator(c10::DeviceType::CUDA)->allocate(nbytes);
      void* data = inner.get();
      c10::DeleterFnPtr deleter = inner.get_deleter();
      void* context = inner.release_context();
      return {data, context, deleter, device};
    }
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

void copy_bytes(void* dest, const void* src, size_t count) {
  if (count == 0) return;
  if (g_backing.load() == c10::DeviceType::CPU) {
    std::memcpy(dest, src, count);  // host memory: a memcpy is the device-to-device copy
    return;
  }
  // GPU memory: the CUDA copy kernel on byte views of both buffers.
  auto bytes = [&](void* p) {
    return at::for_blob(p, {static_cast<int64_t>(count)})
        .options(at::TensorOptions().dtype(at::kByte).device(kGpu))
        .target_device(kGpu)
        .make_tensor();
  };
  bytes(dest).copy_(bytes(const_cast<void*>(src)));
}

c10::Allocator* host_allocator() {
  return &g_allocator;
}

void register_allocator() {
  c10::SetAllocator(kDeviceType, &g_allocator);
}

}  // namespace eagerc::device
