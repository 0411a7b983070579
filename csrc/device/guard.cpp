// Device guard for the reference device. On host memory: one device (index 0) whose
// kernels run synchronously on the calling thread, so every stream and device
// synchronization is already complete when it is asked for. On GPU memory: one device per
// CUDA GPU (eagerc:N's memory is cuda:N's), and the current eagerc device *is* CUDA's
// current device: setting one sets the other, so a generated wrapper's CUDA device guard,
// the caching allocator and CUDA's current stream all follow torch.eagerc.set_device and
// the device guard. Likewise an eagerc stream is the CUDA stream of the same id (its events
// CUDA events): kernels run on cuda:N's current stream, which is eagerc:N's current stream.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
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

c10::DeviceIndex resolved(c10::DeviceIndex index) {
  return index >= 0 ? index : current_index();
}

c10::Device cuda_device(c10::DeviceIndex index) {
  return {c10::DeviceType::CUDA, resolved(index)};
}

// Host memory: streams are names only. Every call has finished when it returns, so each
// stream is always idle and every event complete; a stream set current stays current on
// its thread (as CUDA's current stream), so torch.accelerator.set_stream/current_stream and
// stream contexts round-trip.
thread_local c10::StreamId t_host_stream = 0;

c10::Stream host_stream(c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, 0), id);
}

c10::Stream new_host_stream() {
  static std::atomic<c10::StreamId> next{1};
  return host_stream(next.fetch_add(1));
}

// A host event is the time its record() ran at (the work before it has finished then).
struct HostEvent {
  std::chrono::steady_clock::time_point at;
  bool timing;
};

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
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return device_count();
    } catch (...) {
      return 1;
    }
  }

  // Streams. On GPU memory an eagerc stream is the CUDA stream of the same id on the same
  // index, so kernels (which run on CUDA's current stream), copies and the caching
  // allocator all follow torch.eagerc's current stream.
  c10::Stream getStream(c10::Device d) const noexcept override {
    if (on_gpu()) return eagerc_stream(cuda()->getStream(cuda_device(d.index())));
    return host_stream(t_host_stream);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    if (on_gpu()) return eagerc_stream(cuda()->getDefaultStream(cuda_device(d.index())));
    return host_stream(0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const override {
    if (on_gpu()) return eagerc_stream(cuda()->getStreamFromGlobalPool(cuda_device(d.index()), isHighPriority));
    return new_host_stream();
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    check_type(d);
    if (on_gpu()) return eagerc_stream(cuda()->getNewStream(cuda_device(d.index()), priority));
    return new_host_stream();
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    if (on_gpu()) return eagerc_stream(cuda()->exchangeStream(cuda_stream(s)));
    const c10::StreamId old = t_host_stream;
    t_host_stream = s.id();
    return host_stream(old);
  }
  bool queryStream(const c10::Stream& stream) const override {
    return !on_gpu() || cuda()->queryStream(cuda_stream(stream));
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    if (on_gpu()) cuda()->synchronizeStream(cuda_stream(stream));
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (on_gpu()) cuda()->synchronizeDevice(resolved(device_index));
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    if (on_gpu()) cuda()->recordDataPtrOnStream(data_ptr, cuda_stream(stream));
  }

  // Events: CUDA events on GPU memory; on host memory a time stamp.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "eagerc: an event of device index " + std::to_string(static_cast<int>(device_index)) +
                    " cannot be recorded on a stream of device index " +
                    std::to_string(static_cast<int>(stream.device_index())));
    if (on_gpu()) {
      cuda()->record(event, cuda_stream(stream), device_index, flag);
      return;
    }
    // enable_timing=True asks for the backend's default event, which keeps time.
    if (*event == nullptr) *event = new HostEvent{{}, flag == c10::EventFlag::BACKEND_DEFAULT};
    static_cast<HostEvent*>(*event)->at = std::chrono::steady_clock::now();
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (on_gpu()) cuda()->block(event, cuda_stream(stream));
  }
  bool queryEvent(void* event) const override {
    return !on_gpu() || cuda()->queryEvent(event);
  }
  void synchronizeEvent(void* event) const override {
    if (on_gpu()) cuda()->synchronizeEvent(event);
  }
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    if (event == nullptr) return;
    if (on_gpu()) {
      cuda()->destroyEvent(event, device_index);
    } else {
      delete static_cast<HostEvent*>(event);
    }
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    if (on_gpu()) return cuda()->elapsedTime(start, end, device_index);
    TORCH_CHECK(start != nullptr && end != nullptr,
                "eagerc: both events must be recorded before calculating elapsed time");
    const auto* a = static_cast<const HostEvent*>(start);
    const auto* b = static_cast<const HostEvent*>(end);
    TORCH_CHECK(a->timing && b->timing,
                "eagerc: both events must be created with enable_timing=True to measure elapsed time");
    return std::chrono::duration<double, std::milli>(b->at - a->at).count();
  }
};

}  // namespace

c10::Stream cuda_stream(const c10::Stream& stream) {
  return c10::Stream(c10::Stream::UNSAFE, cuda_device(stream.device_index()), stream.id());
}

c10::Stream eagerc_stream(const c10::Stream& stream) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, stream.device_index()), stream.id());
}

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
