// Allocation for compiled CPU kernels without a trip through the dispatcher.
//
// Inductor's wrapper allocates each output with aoti_torch_empty_strided, i.e.
// at::empty_strided through the dispatcher (and, on the eagerc device, its runtime op).
// A native CPU kernel allocates its output directly. An artifact that exports
// eagerc_set_allocator (eagerc/compile/direct_alloc.py adds it) is handed this function
// when it is loaded: CPU tensors, tensors of a device whose memory has a home (the
// eagerc device, on host or GPU memory: its own allocator) and CUDA tensors on the current device (a GPU wrapper's, after its device
// guard; CUDA's caching allocator through c10::GetAllocator) are made here directly;
// anything else goes to aoti_torch_empty_strided.
#pragma once

#include <cstdint>
#include <exception>

struct AtenTensorOpaque;

namespace eagerc {

int32_t direct_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                             int32_t dtype, int32_t device_type, int32_t device_index,
                             AtenTensorOpaque** out);

// The exception an allocation of this thread failed with (out of memory, say), taken: the
// wrapper only sees an error code and throws its own generic error, which Artifact::run
// replaces with this one, so the caller gets native eager's type and message. Null if none.
std::exception_ptr take_allocation_error();

// Hands direct_empty_strided to a loaded library that asks for it (dlopen handle).
void offer_direct_allocation(void* library_handle);

}  // namespace eagerc
