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
#include <c10/util/SmallVector.h>

#include <utility>

namespace eagerc {

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

// After a CPU kernel wrote `alias` (a CallAliases alias of device tensor `original`): if
// it resized it, give `original` the new sizes and strides and copy the bytes over.
void sync_written(const at::Tensor& original, const at::Tensor& alias);

}  // namespace eagerc
