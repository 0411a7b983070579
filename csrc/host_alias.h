// Zero-copy aliases between the CPU and a device whose memory is host memory.
//
// A target decides how a kernel sees a device's tensors (eagerc/targets.py). When the
// device keeps its memory on the host (the eagerc device, or any device whose Inductor
// backend generates host C++), a CPU kernel can run on a CPU alias of its tensors, and
// a CPU result can be handed back as a tensor of that device over the same bytes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <utility>

namespace eagerc {

// A CPU tensor over the memory of `t` (a tensor of a host-memory device): same sizes,
// strides, storage offset, dtype and conj/neg bits; writes through it are visible in `t`.
// It holds a reference to t's storage, so it stays valid if `t` dies first, but not if
// t's storage is later resized (resize_ may move the bytes). Not resizable itself;
// carries no autograd state.
at::Tensor cpu_alias(const at::Tensor& t);

// The converse: a tensor on `device` over the memory of CPU tensor `t`, same layout,
// holding a reference to t's storage (to hand a CPU-allocated result back).
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
