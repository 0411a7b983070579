// Internal pieces of the eagerc reference-device runtime (PrivateUse1).
// Each .cpp in csrc/device/ owns one concept (allocator, guard, generator + hooks, ops);
// device_bindings.cpp calls the register_* functions once, in order.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace eagerc::device {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
// Inductor's C++ kernels assume 64-byte aligned buffers (as from CPU's allocator).
constexpr size_t kAlignment = 64;

// allocator.cpp: the device's memory, tagged with the eagerc device: 64-byte-aligned
// host memory, or (set_backing(CUDA), before any allocation) CUDA caching-allocator memory.
void set_backing(c10::DeviceType backing);
c10::DeviceType backing();
c10::Allocator* host_allocator();  // the device's allocator, whatever its backing
// Within the device's memory; on GPU memory, a copy by `index`'s GPU (-1: the current one).
void copy_bytes(void* dest, const void* src, size_t count, c10::DeviceIndex index = -1);
// Host memory: freed blocks are kept by size for reuse (bounded). empty_cache() returns them
// to malloc and says how many bytes that was; cached_bytes() is what is kept now.
size_t empty_cache();
size_t cached_bytes();
void set_cache_limit(size_t bytes);  // 0: keep none (empties the cache)
void register_allocator();

// guard.cpp: the device's indices. Host memory: one device, index 0, synchronous. GPU
// memory: one per CUDA GPU (eagerc:N on cuda:N), the current one being CUDA's current device.
c10::DeviceIndex device_count();
c10::DeviceIndex current_index();
void set_current_index(c10::DeviceIndex index);  // -1: no change
void check_index(c10::DeviceIndex index);        // raises unless -1 or a device's index
void register_guard();

// hooks.cpp: PrivateUse1 hooks and the per-device default generator.
const at::Generator& default_generator(c10::DeviceIndex index);
void register_hooks();

// ops.cpp: the hand-written ATen kernels (the table of runtime ops).
void register_ops();
std::vector<std::string> runtime_op_names();  // "aten::name.overload"

// autocast.cpp: torch.autocast on the device, with CUDA's cast policies per op.
void register_autocast();

// attention_choice.cpp: scaled_dot_product_attention's fused-backend choice (the CPU's,
// for host memory, asked about metadata-only stand-ins).
void register_attention_choice();

}  // namespace eagerc::device
