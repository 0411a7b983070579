// Device memory for what a memory home's kernel allocates while it serves a device call.
//
// On host memory, a call of the device that runs a CPU kernel on zero-copy aliases (ATen's
// kernel on aliases, a kernel compiled on home aliases, a captured graph) returns that
// kernel's CPU outputs to the caller as the device's tensors over the same bytes
// (alias_on_device). Those bytes must come from the device's allocator, which the device's
// memory statistics, empty_cache and record_stream account for; copying them there
// afterwards would cost a copy on every call. So, for the length of such a call, the CPU
// allocator of this thread hands out the device's memory, tagged as CPU memory: the
// kernel's allocations (its outputs, and its scratch while it runs) are the device's.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace eagerc {

// Installs the CPU allocator that serves HomeAllocationsOnDevice (once; set_memory_home
// calls it when a device's memory home is the CPU). Other CPU allocations pass through to
// the CPU allocator installed before it.
void install_home_allocator();

// For its lifetime, this thread's CPU allocations come from the allocator of `device`
// (where the memory of `device` lives on the CPU; anywhere else it changes nothing: a GPU
// home's kernels allocate from CUDA's caching allocator, which is the device's backing).
class HomeAllocationsOnDevice {
 public:
  explicit HomeAllocationsOnDevice(c10::Device device);
  ~HomeAllocationsOnDevice();
  HomeAllocationsOnDevice(const HomeAllocationsOnDevice&) = delete;
  HomeAllocationsOnDevice& operator=(const HomeAllocationsOnDevice&) = delete;

 private:
  c10::Allocator* previous_;
};

}  // namespace eagerc
