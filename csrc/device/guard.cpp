// Device guard for the reference device. On host memory: one device (index 0) whose
// kernels run synchronously on the calling thread, so every stream and device
// synchronization is already complete when it is asked for. On GPU memory: one device per
// CUDA GPU (eagerc:N's memory is cuda:N's), and the current eagerc device *is* CUDA's
// current device: setting one sets the other, so a generated wrapper's CUDA device guard,
// the caching allocator and CUDA's current stream all follow torch.eagerc.set_device and
// the device guard. Kernels run on cuda:N's current stream, which synchronization waits for.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <string>

#include "device/runtime.h"

namespace eagerc::device {
namespace {

bool on_gpu() {
  return backing() == c10::DeviceType::CUDA;
}

const c10::impl::DeviceGuardImplInterface* cuda() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

void check_type(c10::Device d) {
  TORCH_CHECK(d.type() == kDeviceType, "eagerc: expected an eagerc device, got ", d);
  check_index(d.index());
}

c10::Stream default_stream(c10::DeviceIndex index) {
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDeviceType, index >= 0 ? index : current_index()));
}

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDeviceType;
  }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_type(d);
    const c10::DeviceIndex old = current_index();
    if (d.index() >= 0 && d.index() != old) set_current_index(d.index());
    return {kDeviceType, old};
  }
  c10::Device getDevice() const override {
    return {kDeviceType, current_index()};
  }
  void setDevice(c10::Device d) const override {
    check_type(d);
    set_current_index(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (on_gpu() && d.index() >= 0) cuda()->uncheckedSetDevice(c10::Device(c10::DeviceType::CUDA, d.index()));
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return default_stream(d.index());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return default_stream(d.index());
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return default_stream(s.device_index());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return device_count();
    } catch (...) {
      return 1;
    }
  }
  bool queryStream(const c10::Stream& stream) const override {
    if (!on_gpu()) return true;
    return cuda()->queryStream(cuda()->getStream(c10::Device(c10::DeviceType::CUDA, stream.device_index())));
  }
  // On GPU memory, kernels run asynchronously on the CUDA device's current stream.
  void synchronizeStream(const c10::Stream& stream) const override {
    synchronizeDevice(stream.device_index());
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (on_gpu()) cuda()->synchronizeDevice(device_index >= 0 ? device_index : current_index());
  }
};

}  // namespace

c10::DeviceIndex device_count() {
  return on_gpu() ? cuda()->deviceCount() : 1;
}

c10::DeviceIndex current_index() {
  return on_gpu() ? cuda()->getDevice().index() : 0;
}

void set_current_index(c10::DeviceIndex index) {
  check_index(index);
  if (on_gpu() && index >= 0) cuda()->setDevice(c10::Device(c10::DeviceType::CUDA, index));
}

void check_index(c10::DeviceIndex index) {
  const c10::DeviceIndex count = device_count();
  if (index >= -1 && index < count) return;
  // The message is made without streaming an integer: on the GPU machine an integer
  // formatted through std::ostream in code built there crashed (SIGSEGV in num_put), which
  // turned this error into a crash of torch.empty(1, device="eagerc:<past the GPUs>").
  const std::string what = "eagerc: device index " + std::to_string(static_cast<int>(index)) +
                           " is out of range: ";
  if (on_gpu()) {
    // Native CUDA's error for cuda:N past its GPUs (torch.AcceleratorError, first line
    // included): eagerc:N is cuda:N's memory, so this is the same request.
    constexpr int32_t kCudaErrorInvalidDevice = 101;
    throw c10::AcceleratorError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, kCudaErrorInvalidDevice,
        "CUDA error: invalid device ordinal\n" + what +
            "the eagerc device on GPU memory has one device per GPU, " +
            std::to_string(static_cast<int>(count)) + " here");
  }
  C10_THROW_ERROR(Error, what + "the eagerc device on host memory has exactly one device, index 0");
}

void register_guard() {
  // The registry does not own its entries; this one lives for the process.
  static c10::impl::DeviceGuardImplRegistrar registrar(kDeviceType, new GuardImpl());
}

}  // namespace eagerc::device
