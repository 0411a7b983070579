// PrivateUse1 hooks and the default random generator of the reference device.
#include <cstring>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  TORCH_CHECK(index == -1 || index == 0, "eagerc: device index ", static_cast<int>(index),
              " is out of range: the eagerc device has exactly one device, index 0");
  return 0;
}

// A CPU (mt19937) generator that reports the eagerc device: random ops on eagerc
// run CPU-generated code, and torch.manual_seed reaches it through torch.eagerc.
class EagercGenerator final : public at::CPUGeneratorImpl {
 public:
  explicit EagercGenerator(c10::DeviceIndex index) {
    device_ = c10::Device(kDeviceType, checked_index(index));
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }

 private:
  // CPUGeneratorImpl's clone would answer a CPU generator; keep the device.
  EagercGenerator* clone_impl() const override {
    auto* copy = new EagercGenerator(device_.index());
    copy->set_state(*get_state());
    return copy;
  }
};

// Host memory is the device memory, so "pinned" host memory is the pinned memory of
// whatever GPU runtime is present (CUDA on the GPU machine), else ordinary host memory.
// This matters because a registered PrivateUse1 backend becomes torch.accelerator,
// and Tensor.pin_memory() asks the accelerator's hooks.
bool has_cuda() {
  return at::detail::getCUDAHooks().hasCUDA();
}

struct Hooks final : public at::PrivateUse1HooksInterface {
  void init() const override {}
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return 1;
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    checked_index(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return 0;
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    checked_index(device);
    return 0;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex /*device*/) const override {
    return 0;
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<EagercGenerator>(device_index);
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return {kDeviceType, 0};
  }
  bool isPinnedPtr(const void* data) const override {
    return has_cuda() && at::detail::getCUDAHooks().isPinnedPtr(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return has_cuda() ? at::detail::getCUDAHooks().getPinnedMemoryAllocator()
                      : c10::GetCPUAllocator();
  }
  // Storage.resize_() on an eagerc storage: reallocate, keep the common prefix.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "eagerc: trying to resize a storage that is not resizable");
    c10::DataPtr fresh = host_allocator()->allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    copy_bytes(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  checked_index(index);
  static const at::Generator generator = at::make_generator<EagercGenerator>(0);
  return generator;
}

void register_hooks() {
  // The hooks object lives for the process: torch keeps a raw pointer to it.
  at::RegisterPrivateUse1HooksInterface(new Hooks());
}

}  // namespace eagerc::device
