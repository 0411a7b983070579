// Zero-copy aliases between a device and the "home" of its memory.
//
// A target decides how a kernel sees a device's tensors (eagerc/targets.py). When the
// device keeps its memory where another device's kernels can address it (host memory:
// the eagerc device by default, or any device whose Inductor backend generates host C++;
// GPU memory: the eagerc device with EAGERC_BACKING=cuda), a kernel of that home device
// (CPU or CUDA) can run on an alias of its tensors, and a result can be handed back as a
// tensor of the device over the same bytes. Names say "cpu"/"host" for the common case.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <ATen/core/stack.h>

#include <array>
#include <optional>
#include <utility>

namespace eagerc {

struct OpPlan;  // arg_kinds.h

// Declares where device type `served` keeps its memory: `home` (CPU or CUDA) kernels may
// address it. A device type never declared is its own home (no aliases).
void set_memory_home(c10::DeviceType served, c10::DeviceType home);
// The device whose kernels address the memory of a tensor on `d` (same index for a GPU home).
c10::Device memory_home(c10::Device d);
// Whether tensors on `d` are swapped for aliases on their memory's home.
bool has_other_home(c10::Device d);

// A tensor on memory_home(t.device()) over the memory of `t`: same sizes,
// strides, storage offset, dtype and conj/neg bits; writes through it are visible in `t`.
// It holds a reference to t's storage, so it stays valid if `t` dies first, but not if
// t's storage is later resized (resize_ may move the bytes). Not resizable itself;
// carries no autograd state.
at::Tensor cpu_alias(const at::Tensor& t);

// The converse: a tensor on `device` over the memory of `t` (a tensor on the memory's
// home), same layout, holding a reference to t's storage (to hand a result back).
at::Tensor alias_on_device(const at::Tensor& t, c10::Device device);

// How a device takes over the home memory of a fresh result (host memory: a CPU
// kernel's output, made by the CPU allocator) so that its memory statistics
// (torch.accelerator.memory_allocated, memory_stats, the peaks) count it as they count its
// own allocations: returns a DataPtr of `device` that owns `home_memory` (same bytes, freed
// in the end by home_memory's own deleter) and counts `nbytes` as the device's while it
// lives. Asked only where the device's memory home is the CPU: a GPU home's kernels
// already allocate from the caching allocator the device's statistics read.
using HomeMemoryAdopter = c10::DataPtr (*)(c10::DataPtr&& home_memory, size_t nbytes, c10::Device device);
void set_home_memory_adopter(c10::DeviceType served, HomeMemoryAdopter adopt);

// A result of a home kernel run for a call of `device`, handed back as a tensor of
// `device` over the same bytes (no copy). Where the device has an adopter and `t` is the
// only holder of its memory (no other tensor, storage reference, weak reference or Python
// object: a kernel's fresh output), a storage of the device owns that memory, counted in
// the device's statistics and resizable with the device's allocator, as its own tensors'
// storages are; the CPU storage is left empty (nothing can reach it). Otherwise (a view
// of the device's own memory, a storage others share) an alias, as alias_on_device makes.
at::Tensor result_on_device(at::Tensor t, c10::Device device);

// CPU aliases for the tensors of one call. Tensors over one device storage get aliases
// over one CPU storage, so the CPU kernel's overlap checks (an out= or in-place argument
// that overlaps an input) see what they would see on the device itself. The aliases are
// resizable: a CPU kernel may resize an out= argument (see sync_written).
class CallAliases {
 public:
  at::Tensor alias(const at::Tensor& t);

 private:
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages_;
};

// A CPU alias that one call site keeps from call to call (per thread) and points at each
// call's tensor: on a path that runs every call on aliases (a typed convolution's hit),
// no StorageImpl or TensorImpl is created or freed. Each bind() sets every piece of the
// alias's metadata from the tensor (its storage's bytes and size, sizes, strides, offset,
// conj and neg bits) and holds a reference to the tensor's storage, as cpu_alias does;
// release() drops that reference, so between calls the alias keeps no device memory alive.
// An alias that anyone else still holds when the call ends (a kernel kept it, returned
// it, or changed its metadata beyond what bind() sets) is given up to them and a fresh
// one made next time. Use it through BoundAlias.
class ReusedAlias {
 public:
  at::Tensor bind(const at::Tensor& t);
  void release() noexcept;

 private:
  bool reusable() const;

  at::Tensor alias_;
  c10::intrusive_ptr<c10::StorageImpl> storage_;  // alias_'s storage as made
  c10::DispatchKeySet keys_;                      // alias_'s keys as made (no conj or neg bit)
};

// One use of a ReusedAlias for the length of a call: bound on construction, released on
// destruction (also when the call throws).
class BoundAlias {
 public:
  BoundAlias(ReusedAlias& slot, const at::Tensor& t) : slot_(slot), alias_(slot.bind(t)) {}
  ~BoundAlias() {
    alias_.reset();
    slot_.release();
  }
  BoundAlias(const BoundAlias&) = delete;
  BoundAlias& operator=(const BoundAlias&) = delete;
  const at::Tensor& get() const { return alias_; }

 private:
  ReusedAlias& slot_;
  at::Tensor alias_;
};

// The home-device aliases of one typed kernel call's tensor arguments (nullptr: an absent
// optional argument). Each argument position keeps its ReusedAlias in `slots` (the call
// site's, per thread), unless two of the tensors share a storage: those calls take
// CallAliases, which gives them one home storage, as on the device.
template <size_t N>
class ArgumentAliases {
 public:
  ArgumentAliases(std::array<ReusedAlias, N>& slots, const std::array<const at::Tensor*, N>& tensors) {
    if (share_a_storage(tensors)) {
      shared_.emplace();
      for (size_t i = 0; i < N; ++i) {
        if (tensors[i] == nullptr) continue;
        fresh_[i] = shared_->alias(*tensors[i]);
        on_alias_[i] = &fresh_[i];
      }
      return;
    }
    for (size_t i = 0; i < N; ++i) {
      if (tensors[i] == nullptr) continue;
      bound_[i].emplace(slots[i], *tensors[i]);
      on_alias_[i] = &bound_[i]->get();
    }
  }
  // The aliases in argument order (nullptr where the argument is absent).
  const std::array<const at::Tensor*, N>& get() const { return on_alias_; }

 private:
  static bool share_a_storage(const std::array<const at::Tensor*, N>& tensors) {
    for (size_t i = 0; i < N; ++i) {
      for (size_t j = i + 1; j < N; ++j) {
        if (tensors[i] != nullptr && tensors[j] != nullptr &&
            tensors[i]->storage().unsafeGetStorageImpl() == tensors[j]->storage().unsafeGetStorageImpl()) {
          return true;
        }
      }
    }
    return false;
  }

  std::optional<CallAliases> shared_;
  std::array<at::Tensor, N> fresh_;
  std::array<std::optional<BoundAlias>, N> bound_;
  std::array<const at::Tensor*, N> on_alias_{};
};

// After a CPU kernel wrote `alias` (a CallAliases alias of device tensor `original`): if
// it resized it, give `original` the new sizes and strides and copy the bytes over.
void sync_written(const at::Tensor& original, const at::Tensor& alias);

// A host-memory device's tensors are swapped for zero-copy CPU aliases, the CPU kernel
// runs on them, and fresh outputs are handed back as tensors of the device over the same
// memory. Returns the device (the first non-CPU tensor's or device argument's).
// `written` (optional) receives (device tensor, alias) for the tensor arguments the
// plan marks as written.
c10::Device swap_to_cpu_aliases(
    size_t n, torch::jit::Stack* stack, const OpPlan* plan = nullptr,
    c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2>* written = nullptr);

}  // namespace eagerc
