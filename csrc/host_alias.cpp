#include "host_alias.h"

#include "arg_kinds.h"
#include "home_generator.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace eagerc {
namespace {

// served device type -> its memory's home device type (unset: itself).
std::array<std::atomic<int>, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
    g_homes{};
constexpr int kUnset = 0;  // stored as type + 1

// served device type -> how its allocator takes over home memory (null: it does not).
std::array<std::atomic<HomeMemoryAdopter>, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
    g_adopters{};

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
                      resizable ? c10::GetAllocator(device.type()) : nullptr, resizable);
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

void set_memory_home(c10::DeviceType served, c10::DeviceType home) {
  g_homes[static_cast<size_t>(served)].store(static_cast<int>(home) + 1);
}

c10::Device memory_home(c10::Device d) {
  const int home = g_homes[static_cast<size_t>(d.type())].load(std::memory_order_relaxed);
  if (home == kUnset) return d;
  const auto type = static_cast<c10::DeviceType>(home - 1);
  return type == c10::kCPU ? c10::Device(c10::kCPU) : c10::Device(type, std::max<c10::DeviceIndex>(d.index(), 0));
}

bool has_other_home(c10::Device d) {
  return g_homes[static_cast<size_t>(d.type())].load(std::memory_order_relaxed) != kUnset;
}

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && has_other_home(t.device()), "eagerc: cpu_alias expects a tensor of a ",
              "device whose memory has a home device, got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, memory_home(t.device()));
}

at::Tensor CallAliases::alias(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && has_other_home(t.device()), "eagerc: CallAliases expects a tensor of a ",
              "device whose memory has a home device, got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  const c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  const c10::Device home = memory_home(t.device());
  for (const auto& [impl, storage] : storages_) {
    if (impl == source) return view_of(t, storage, home);
  }
  storages_.emplace_back(source, storage_alias(t, home, /*resizable=*/true));
  return view_of(t, storages_.back().second, home);
}

bool ReusedAlias::reusable() const {
  // Only this slot holds the alias and its storage (no strong or weak reference kept by a
  // kernel), and nothing changed what bind() does not set again.
  if (!alias_.defined() || alias_.use_count() != 1 || alias_.weak_use_count() != 1) return false;
  const c10::TensorImpl* impl = alias_.unsafeGetTensorImpl();
  return impl->storage().unsafeGetStorageImpl() == storage_.get() && storage_.use_count() == 2 &&
         storage_.weak_use_count() == 1 && !storage_->resizable() &&
         impl->autograd_meta() == nullptr &&
         impl->key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative) ==
             keys_;
}

at::Tensor ReusedAlias::bind(const at::Tensor& t) {
  TORCH_CHECK(t.defined() && has_other_home(t.device()), "eagerc: ReusedAlias expects a tensor of a ",
              "device whose memory has a home device, got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  const c10::Device home = memory_home(t.device());
  if (!reusable() || alias_.dtype() != t.dtype() || alias_.device() != home) {
    alias_ = alias_on(t, home);
    storage_ = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
        alias_.storage().unsafeGetStorageImpl());
    keys_ = alias_.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
    return alias_;
  }
  c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  void* data = source->mutable_data();
  c10::raw::intrusive_ptr::incref(source);
  storage_->set_data_ptr_noswap(c10::DataPtr(data, source, &release_storage, home));
  storage_->set_nbytes(source->nbytes());
  c10::TensorImpl* impl = alias_.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  impl->_set_conj(t.is_conj());
  impl->_set_neg(t.is_neg());
  return alias_;
}

void ReusedAlias::release() noexcept {
  if (!reusable()) {
    alias_.reset();  // whoever holds it keeps it, and the memory it points at
    storage_.reset();
    return;
  }
  storage_->set_data_ptr_noswap(c10::DataPtr(nullptr, alias_.device()));  // drops t's storage
  storage_->set_nbytes(0);
}

void sync_written(const at::Tensor& original, const at::Tensor& alias) {
  if (alias.sizes() == original.sizes() && alias.strides() == original.strides() &&
      alias.storage_offset() == original.storage_offset() &&
      alias.storage().data() == original.storage().data()) {
    return;  // written in place
  }
  // The kernel resized its out= (new memory on the home device): the device tensor takes the new
  // geometry through the device's own resize_, then the bytes. The storage must cover the
  // alias's strides, not only its sizes: linalg_lstsq leaves a 3x2 solution with strides
  // [1, 5] over a 5x2 buffer (a contiguous resize was too small for it).
  const int64_t item = static_cast<int64_t>(alias.dtype().itemsize());
  const int64_t bytes = static_cast<int64_t>(at::detail::computeStorageNbytes(
      alias.sizes(), alias.strides(), item, alias.storage_offset()));
  const int64_t elements = (bytes + item - 1) / item - original.storage_offset();
  if (elements > 0 && (alias.strides() != original.strides() || alias.sizes() != original.sizes())) {
    original.resize_({std::max<int64_t>(elements, original.numel())});
  }
  original.as_strided_(alias.sizes(), alias.strides(), original.storage_offset());
  cpu_alias(original).copy_(alias);
}

at::Tensor alias_on_device(const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(t.defined() && t.device() == memory_home(device),
              "eagerc: alias_on_device expects a tensor on ", memory_home(device), ", got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  return alias_on(t, device);
}

void set_home_memory_adopter(c10::DeviceType served, HomeMemoryAdopter adopt) {
  g_adopters[static_cast<size_t>(served)].store(adopt);
}

namespace {

// Whether `t` alone reaches its storage: no other strong, weak or Python reference to t
// or to its storage.
bool sole_holder(const at::Tensor& t) {
  if (t.use_count() != 1 || t.weak_use_count() != 1 ||
      t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj() != nullptr) {
    return false;
  }
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage == nullptr || storage->pyobj_slot()->load_pyobj() != nullptr) return false;
  // The storage's counts, read through a handle that neither takes nor gives a reference.
  auto counted = c10::intrusive_ptr<c10::StorageImpl>::reclaim(storage);
  const bool only_t = counted.use_count() == 1 && counted.weak_use_count() == 1;
  counted.release();
  return only_t;
}

// Whether `t` alone reaches its memory, which is home memory a device may own: its sole
// holder, and owned bytes of the home's (not an alias of a device's storage, not
// copy-on-write, not a pointer without an owner).
bool sole_owner_of_home_memory(const at::Tensor& t) {
  if (!sole_holder(t)) return false;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const c10::DataPtr& memory = storage->data_ptr();
  return memory.get() != nullptr && memory.get_context() != nullptr && storage->nbytes() > 0 &&
         memory.device() == t.device() && memory.get_deleter() != &release_storage &&
         !c10::impl::cow::is_cow_data_ptr(memory);
}

}  // namespace

at::Tensor result_on_device(at::Tensor t, c10::Device device) {
  TORCH_CHECK(t.defined() && t.device() == memory_home(device),
              "eagerc: result_on_device expects a tensor on ", memory_home(device), ", got ",
              t.defined() ? c10::str(t.device()) : std::string("an undefined tensor"));
  const HomeMemoryAdopter adopt = g_adopters[static_cast<size_t>(device.type())].load(std::memory_order_relaxed);
  if (adopt != nullptr && t.device().is_cpu() && t.storage().nbytes() == 0 && sole_holder(t)) {
    // A fresh empty result (zeros(0), new_empty({0}) answered by a home kernel) gets an
    // empty storage of the device's own, resizable as the device's empty tensors are:
    // an out= kernel may grow it (linalg_solve_ex's LU and pivots, from B.new_empty({0})).
    c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(device.type()),
                         /*resizable=*/true);
    return view_of(t, std::move(storage), device);
  }
  const c10::DataPtr& held = t.storage().data_ptr();
  if (held.get_deleter() == &release_storage) {
    // A result over an argument's alias (unsafe_split's pieces, which alias self though the
    // schema says nothing of it): a view of the argument's own storage, as eager's result
    // is (torch._C._is_alias_of(piece, self)), not a second storage over its bytes.
    auto* argument = static_cast<c10::StorageImpl*>(held.get_context());
    if (argument->device_type() == device.type() && argument->data() == held.get()) {
      return view_of(t, c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(argument)), device);
    }
  }
  if (adopt == nullptr || !t.device().is_cpu() || !sole_owner_of_home_memory(t)) return alias_on(t, device);
  c10::StorageImpl* source = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = source->nbytes();
  c10::DataPtr memory = source->set_data_ptr(c10::DataPtr(nullptr, t.device()));
  source->set_nbytes(0);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, adopt(std::move(memory), nbytes, device),
                       c10::GetAllocator(device.type()), /*resizable=*/true);
  return view_of(t, std::move(storage), device);
}

namespace {

bool holds_tensors(const c10::IValue& list) {
  for (const c10::IValue& e : list.toListRef()) {
    if (e.isTensor()) return true;
  }
  return false;
}

}  // namespace

c10::Device swap_to_cpu_aliases(
    size_t n, torch::jit::Stack* stack, const OpPlan* plan,
    c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2>* written) {
  c10::Device device(c10::kCPU);
  CallAliases aliases;
  auto alias = [&](const at::Tensor& t) {
    if (!t.defined() || !has_other_home(t.device())) return t;
    device = t.device();
    return aliases.alias(t);
  };
  const size_t base = stack->size() - n;
  for (size_t i = base; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      at::Tensor original = v.toTensor();
      v = alias(original);
      if (written && plan->mutated[i - base] && original.defined() && has_other_home(original.device())) {
        written->emplace_back(std::move(original), v.toTensor());
      }
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(alias(t));
      if (written && plan->mutated[i - base]) {
        // A Tensor(a!)[] out= (split_with_sizes_copy.out, unbind_copy.int_out): the kernel
        // may resize each element, which moves its alias to new memory.
        const c10::List<at::Tensor> originals = v.toTensorList();
        for (size_t k = 0; k < originals.size(); ++k) {
          const at::Tensor original = originals.get(k);
          if (original.defined() && has_other_home(original.device())) written->emplace_back(original, out.get(k));
        }
      }
      v = out;
    } else if (v.isList() && holds_tensors(v)) {  // Tensor?[] (an int[] keeps its IntList tag)
      auto list = v.toList();
      c10::impl::GenericList out(list.elementType());
      for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(alias(e.toTensor())) : e);
      v = out;
    } else if (v.isDevice() && has_other_home(v.toDevice())) {
      device = v.toDevice();
      if (!device.has_index()) {
        // device="eagerc": results go to the current device, with its index, as eager's do
        // (an index-less tensor device broke later out= calls on it).
        device = c10::impl::getDeviceGuardImpl(device.type())->getDevice();
      }
      v = memory_home(device);
    } else if (v.isGenerator()) {
      v = home_of(v.toGenerator());  // the device generator's state, as the home's kernel takes it
    }
  }
  return device;
}

}  // namespace eagerc
