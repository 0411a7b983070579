#include "host_alias.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

namespace eagerc {
namespace {

void release_storage(void* ctx) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
}

// A tensor on `device` over the bytes of t's storage. The new storage's DataPtr names
// `device` (TensorImpl takes its device from it) and owns one reference to t's
// StorageImpl, so the bytes outlive whichever of the two tensors dies last.
at::Tensor alias_on(const at::Tensor& t, c10::Device device) {
  c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  void* data = source->mutable_data();
  c10::raw::intrusive_ptr::incref(source);
  c10::DataPtr ptr(data, source, &release_storage, device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), source->nbytes(), std::move(ptr),
                       /*allocator=*/nullptr, /*resizable=*/false);
  const c10::DispatchKey key = c10::computeDispatchKey(t.scalar_type(), c10::kStrided, device);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && !t.is_cpu(), "eagerc: cpu_alias expects a tensor of a host-memory ",
              "device, got ", t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, c10::Device(c10::kCPU));
}

at::Tensor alias_on_device(const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(t.defined() && t.is_cpu(), "eagerc: alias_on_device expects a CPU tensor, got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, device);
}

}  // namespace eagerc
