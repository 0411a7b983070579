// Device guard for the reference device: one device (index 0) with one stream.
// On host memory kernels run synchronously on the calling thread, so every stream and
// device synchronization is already complete when it is asked for; on GPU memory they
// run on CUDA device 0's current stream, which synchronization waits for.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

void check_index(c10::Device d) {
  TORCH_CHECK(d.type() == kDeviceType, "eagerc: expected an eagerc device, got ", d);
  TORCH_CHECK(d.index() <= 0, "eagerc: device index ", static_cast<int>(d.index()),
              " is out of range: the eagerc device has exactly one device, index 0");
}

c10::Stream default_stream() {
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDeviceType, 0));
}

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDeviceType;
  }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_index(d);
    return {kDeviceType, 0};
  }
  c10::Device getDevice() const override {
    return {kDeviceType, 0};
  }
  void setDevice(c10::Device d) const override {
    check_index(d);
  }
  void uncheckedSetDevice(c10::Device /*d*/) const noexcept override {}
  c10::Stream getStream(c10::Device /*d*/) const noexcept override {
    return default_stream();
  }
  c10::Stream getDefaultStream(c10::Device /*d*/) const override {
    return default_stream();
  }
  c10::Stream exchangeStream(c10::Stream /*s*/) const noexcept override {
    return default_stream();
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return 1;
  }
  bool queryStream(const c10::Stream& /*stream*/) const override {
    if (backing() != c10::DeviceType::CUDA) return true;
    const auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    return cuda->queryStream(cuda->getStream(c10::Device(c10::DeviceType::CUDA, 0)));
  }
  // On GPU memory, kernels run asynchronously on the CUDA device's current stream.
  void synchronizeStream(const c10::Stream& /*stream*/) const override {
    synchronizeDevice(0);
  }
  void synchronizeDevice(const c10::DeviceIndex /*device_index*/) const override {
    if (backing() == c10::DeviceType::CUDA) {
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(0);
    }
  }
};

}  // namespace

void register_guard() {
  // The registry does not own its entries; this one lives for the process.
  static c10::impl::DeviceGuardImplRegistrar registrar(kDeviceType, new GuardImpl());
}

}  // namespace eagerc::device
