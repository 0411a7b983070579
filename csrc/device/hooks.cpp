// PrivateUse1 hooks and the default random generator of the reference device.
#include <cstring>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

// -1 (the current device) resolved; raises for an index the device does not have.
c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  check_index(index);
  return index >= 0 ? index : current_index();
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
  // One device on host memory; one per CUDA GPU on GPU memory (guard.cpp).
  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_current_index(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_index();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current_index();
    if (device >= 0 && device != old) set_current_index(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<EagercGenerator>(device_index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    if (backing() == c10::DeviceType::CUDA) {
      return {kDeviceType, at::detail::getCUDAHooks().getDeviceFromPtr(data).index()};
    }
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
    // On the storage's own device (its GPU on GPU memory), whichever device is current.
    const c10::DeviceIndex index = impl->device().index();
    const c10::DeviceIndex old = current_index();
    if (index >= 0 && index != old) set_current_index(index);
    struct Restore {
      c10::DeviceIndex old, now;
      ~Restore() {
        if (now >= 0 && now != old) set_current_index(old);
      }
    } restore{old, index};
    c10::DataPtr fresh = host_allocator()->allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    copy_bytes(fresh.get(), impl->data(), keep, index);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  const c10::DeviceIndex i = checked_index(index);
  // One per device index, made on first use; never destroyed (torch keeps references).
  static const auto* generators = [] {
    auto* all = new std::vector<at::Generator>();
    for (c10::DeviceIndex k = 0; k < device_count(); ++k) all->push_back(at::make_generator<EagercGenerator>(k));
    return all;
  }();
  return (*generators)[i];
}

void register_hooks() {
  // The hooks object lives for the process: torch keeps a raw pointer to it.
  at::RegisterPrivateUse1HooksInterface(new Hooks());
}

}  // namespace eagerc::device
