// PrivateUse1 hooks and the random generators of the reference device.
#include <cstring>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include "device/runtime.h"
#include "home_generator.h"

namespace eagerc::device {
namespace {

// -1 (the current device) resolved; raises for an index the device does not have.
c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  check_index(index);
  return index >= 0 ? index : current_index();
}

// The device's generators keep their state in a generator of the memory's home: a CPU
// (mt19937) generator on host memory, cuda:N's (Philox) on GPU memory. A random op the
// holder runs on home aliases draws from that home generator (home_generator.h), so an
// eagerc generator seeded s gives the numbers the home's eager kernel gives with a home
// generator seeded s; its state, seed and offset are the home generator's, in its format.
// Every call takes the home generator's lock as well (a kernel locks only that one).
class EagercGenerator final : public c10::GeneratorImpl, public HomeGenerator {
 public:
  EagercGenerator(c10::DeviceIndex index, at::Generator home)
      : c10::GeneratorImpl(c10::Device(kDeviceType, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        home_(std::move(home)) {}

  const at::Generator& home() const override {
    return home_;
  }
  void set_current_seed(uint64_t seed) override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    impl()->set_current_seed(seed);
  }
  // A CPU home has no offset: this one reads 0 and takes 0 (torch pickles a non-CPU
  // generator's offset: copy.deepcopy); another offset raises the CPU generator's error.
  void set_offset(uint64_t offset) override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    if (offset == 0 && home_.device().is_cpu()) return;
    impl()->set_offset(offset);
  }
  uint64_t get_offset() const override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    return home_.device().is_cpu() ? 0 : impl()->get_offset();
  }
  uint64_t current_seed() const override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    return impl()->current_seed();
  }
  uint64_t seed() override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    return impl()->seed();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    impl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    return impl()->get_state();
  }

 private:
  c10::GeneratorImpl* impl() const {
    return home_.unsafeGetGeneratorImpl();
  }
  // A copy keeps the device and copies the home generator's state.
  EagercGenerator* clone_impl() const override {
    std::lock_guard<std::mutex> lock(impl()->mutex_);
    return new EagercGenerator(device_.index(), home_.clone());
  }

  at::Generator home_;
};

// A new generator of device `index` over a fresh home generator (CPU: torch.Generator()'s
// default seed; GPU: a new cuda:index generator).
at::Generator new_generator(c10::DeviceIndex index) {
  const c10::DeviceIndex i = checked_index(index);
  at::Generator home = backing() == c10::DeviceType::CUDA
                           ? at::detail::getCUDAHooks().getNewGenerator(i)
                           : at::detail::createCPUGenerator();
  return at::make_generator<EagercGenerator>(i, std::move(home));
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
    return new_generator(device_index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    if (backing() == c10::DeviceType::CUDA) {
      return {kDeviceType, at::detail::getCUDAHooks().getDeviceFromPtr(data).index()};
    }
    return {kDeviceType, 0};
  }
  // A registered PrivateUse1 backend becomes torch.accelerator, so Tensor.pin_memory()
  // and is_pinned() ask these: the device's pinned host memory (allocator.cpp).
  bool isPinnedPtr(const void* data) const override {
    return is_pinned(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_allocator();
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
  // Its home is the home's default generator (the CPU's; on GPU memory cuda:N's): the
  // device's compiled random ops draw their seeds from that one (Inductor's seed buffer,
  // filled on the home) and its fallen-back ones run the home's kernels, which draw from
  // it too, so the device's default stream is one state, seeded by torch.manual_seed.
  static const auto* generators = [] {
    auto* all = new std::vector<at::Generator>();
    for (c10::DeviceIndex k = 0; k < device_count(); ++k) {
      const at::Generator& home = backing() == c10::DeviceType::CUDA
                                      ? at::detail::getCUDAHooks().getDefaultGenerator(k)
                                      : at::detail::getDefaultCPUGenerator();
      all->push_back(at::make_generator<EagercGenerator>(k, home));
    }
    return all;
  }();
  return (*generators)[i];
}

void register_hooks() {
  // The hooks object lives for the process: torch keeps a raw pointer to it.
  at::RegisterPrivateUse1HooksInterface(new Hooks());
}

}  // namespace eagerc::device
