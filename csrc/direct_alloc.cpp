#include "direct_alloc.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include "host_alias.h"

namespace eagerc {

namespace {
thread_local std::exception_ptr tls_allocation_error;
}  // namespace

std::exception_ptr take_allocation_error() {
  std::exception_ptr error;
  std::swap(error, tls_allocation_error);
  return error;
}

int32_t direct_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                             int32_t dtype, int32_t device_type, int32_t device_index,
                             AtenTensorOpaque** out) {
  const auto type = static_cast<c10::DeviceType>(device_type);
  // A device whose memory has a home (host or GPU memory) allocates through its own
  // allocator: the wrapper's outputs are the device's tensors (Target.allocate_outputs).
  const bool own_allocator = type == c10::DeviceType::CPU ||
                             (type == c10::DeviceType::PrivateUse1 && device_index <= 0 &&
                              has_other_home(c10::Device(type, 0)));
  const c10::IntArrayRef size(sizes, ndim), stride(strides, ndim);
  const auto scalar_type = static_cast<c10::ScalarType>(dtype);
  if (type == c10::DeviceType::CUDA && device_index >= 0) {
    // A GPU wrapper allocates after its device guard: the caching allocator serves the
    // current device, which must be the one asked for (else the shim decides).
    try {
      at::Tensor t = at::detail::empty_strided_generic(
          size, stride, c10::GetAllocator(type), c10::DispatchKeySet(c10::DispatchKey::CUDA),
          scalar_type);
      if (t.device().index() == device_index) {
        *out = reinterpret_cast<AtenTensorOpaque*>(new at::Tensor(std::move(t)));
        return AOTI_TORCH_SUCCESS;
      }
    } catch (...) {
      tls_allocation_error = std::current_exception();  // unless the shim succeeds below
    }
  }
  if (!own_allocator) {
    const int32_t status = aoti_torch_empty_strided(ndim, sizes, strides, dtype, device_type,
                                                    device_index, reinterpret_cast<AtenTensorHandle*>(out));
    if (status == AOTI_TORCH_SUCCESS) tls_allocation_error = nullptr;
    return status;
  }
  try {
    at::Tensor t = type == c10::DeviceType::CPU
        ? at::detail::empty_strided_cpu(size, stride, scalar_type)
        : at::detail::empty_strided_generic(size, stride, c10::GetAllocator(type),
                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                            scalar_type);
    *out = reinterpret_cast<AtenTensorOpaque*>(new at::Tensor(std::move(t)));
    return AOTI_TORCH_SUCCESS;
  } catch (...) {
    tls_allocation_error = std::current_exception();
    return AOTI_TORCH_FAILURE;
  }
}

void offer_direct_allocation(void* library_handle) {
  using SetFn = void (*)(void*);
  auto set = reinterpret_cast<SetFn>(dlsym(library_handle, "eagerc_set_allocator"));
  if (set) set(reinterpret_cast<void*>(&direct_empty_strided));
}

}  // namespace eagerc
