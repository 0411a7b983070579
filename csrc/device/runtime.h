// Internal pieces of the eagerc reference-device runtime (PrivateUse1).
// Each .cpp in csrc/device/ owns one concept (allocator, guard, generator + hooks, ops);
// device_bindings.cpp calls the register_* functions once, in order.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace eagerc::device {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
// Inductor's C++ kernels assume 64-byte aligned buffers (as from CPU's allocator).
constexpr size_t kAlignment = 64;

// allocator.cpp: the device's memory, tagged with the eagerc device: 64-byte-aligned
// host memory, or (set_backing(CUDA), before any allocation) CUDA caching-allocator memory.
void set_backing(c10::DeviceType backing);
c10::DeviceType backing();
// The device's allocator, whatever its backing: a c10::DeviceAllocator, whose statistics
// (torch.accelerator.memory_stats) are its host memory's, or on GPU memory cuda:N's.
c10::DeviceAllocator* host_allocator();
// Within the device's memory; on GPU memory, a copy by `index`'s GPU (-1: the current one).
void copy_bytes(void* dest, const void* src, size_t count, c10::DeviceIndex index = -1);
// Host memory: freed blocks are kept by size for reuse (bounded). empty_cache() returns them
// to malloc and says how many bytes that was (on GPU memory it empties cuda:N's caching
// allocator's cache instead, and says 0); cached_bytes() is what is kept now.
size_t empty_cache();
size_t cached_bytes();
void set_cache_limit(size_t bytes);  // 0: keep none (empties the cache)
void register_allocator();  // the device's allocator and its pinned host allocator

// A statistic grows or shrinks as CUDA's caching allocators count it.
inline void increase(c10::CachingAllocator::Stat& stat, size_t amount) {
  stat.current += static_cast<int64_t>(amount);
  stat.peak = std::max(stat.peak, stat.current);
  stat.allocated += static_cast<int64_t>(amount);
}
inline void decrease(c10::CachingAllocator::Stat& stat, size_t amount) {
  stat.current -= static_cast<int64_t>(amount);
  stat.freed += static_cast<int64_t>(amount);
}

// pinned_memory.cpp: pinned host memory for the device (torch's host allocator for it):
// CUDA's page-locked memory where a CUDA GPU is present, else host blocks of its own;
// is_pinned() answers for either (false for other host memory).
at::HostAllocator* pinned_allocator();
bool is_pinned(const void* data);

// guard.cpp: the device's indices. Host memory: one device, index 0, synchronous. GPU
// memory: one per CUDA GPU (eagerc:N on cuda:N), the current one being CUDA's current device.
c10::DeviceIndex device_count();
c10::DeviceIndex current_index();
void set_current_index(c10::DeviceIndex index);  // -1: no change
void check_index(c10::DeviceIndex index);        // raises unless -1 or a device's index
// GPU memory: an eagerc stream is the CUDA stream of the same id and index, and back.
c10::Stream cuda_stream(const c10::Stream& stream);
c10::Stream eagerc_stream(const c10::Stream& stream);
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
// The same choice for another PrivateUse1 device eagerc serves on its memory home (a
// vendor's host-memory device), unless that device's runtime registered a choice of its
// own: true when eagerc's choice serves PrivateUse1.
bool serve_attention_choice();

}  // namespace eagerc::device
