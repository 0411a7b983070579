#include "host_alias.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

namespace eagerc {
namespace {

void release_storage(void* ctx) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
}

// A storage on `device` over the bytes of t's storage. Its DataPtr names `device`
// (TensorImpl takes its device from it) and owns one reference to t's StorageImpl, so
// the bytes outlive whichever of the two tensors dies last.
// `resizable` (CPU aliases a CPU kernel writes): a kernel that resizes its out= moves the
// alias to new CPU memory, which the caller then copies back (see sync_written).
c10::Storage storage_alias(const at::Tensor& t, c10::Device device, bool resizable = false) {
  c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  void* data = source->mutable_data();
  c10::raw::intrusive_ptr::incref(source);
  c10::DataPtr ptr(data, source, &release_storage, device);
  return c10::Storage(c10::Storage::use_byte_size_t(), source->nbytes(), std::move(ptr),
                      resizable ? c10::GetCPUAllocator() : nullptr, resizable);
}

// A tensor with t's layout over `storage` (an alias of t's storage on another device).
at::Tensor view_of(const at::Tensor& t, c10::Storage storage, c10::Device device) {
  const c10::DispatchKey key = c10::computeDispatchKey(t.scalar_type(), c10::kStrided, device);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

at::Tensor alias_on(const at::Tensor& t, c10::Device device) {
  return view_of(t, storage_alias(t, device), device);
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && !t.is_cpu(), "eagerc: cpu_alias expects a tensor of a host-memory ",
              "device, got ", t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, c10::Device(c10::kCPU));
}

at::Tensor CallAliases::alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && !t.is_cpu(), "eagerc: CallAliases expects a tensor of a host-memory ",
              "device, got ", t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  const c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  const c10::Device cpu(c10::kCPU);
  for (const auto& [impl, storage] : storages_) {
    if (impl == source) return view_of(t, storage, cpu);
  }
  storages_.emplace_back(source, storage_alias(t, cpu, /*resizable=*/true));
  return view_of(t, storages_.back().second, cpu);
}

void sync_written(const at::Tensor& original, const at::Tensor& alias) {
  if (alias.sizes() == original.sizes() && alias.strides() == original.strides() &&
      alias.storage_offset() == original.storage_offset() &&
      alias.storage().data() == original.storage().data()) {
    return;  // written in place
  }
  // The kernel resized its out= (new CPU memory): the device tensor takes the new
  // geometry through the device's own resize_, then the bytes.
  original.resize_(alias.sizes());
  if (original.strides() != alias.strides()) {
    original.as_strided_(alias.sizes(), alias.strides(), original.storage_offset());
  }
  cpu_alias(original).copy_(alias);
}

at::Tensor alias_on_device(const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(t.defined() && t.is_cpu(), "eagerc: alias_on_device expects a CPU tensor, got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, device);
}

}  // namespace eagerc
