// Zero-copy aliases between eagerc tensors and CPU tensors.
//
// eagerc memory is host memory, so a compiled CPU kernel can run directly on an eagerc
// tensor through a CPU alias of it (and CPU copy_ does the runtime's copies the same way).
#pragma once

#include <ATen/core/Tensor.h>

namespace eagerc::device {

// A CPU tensor over the memory of eagerc tensor `t`: same sizes, strides, storage offset,
// dtype and conj/neg bits; writes through it are visible in `t`. It holds a reference to
// t's storage, so it stays valid if `t` dies first, but not if t's storage is later
// resized (resize_ may move the bytes). Not resizable itself; carries no autograd state.
at::Tensor cpu_alias(const at::Tensor& t);

// The converse: an eagerc tensor over the memory of CPU tensor `t`, same layout, holding
// a reference to t's storage (e.g. to hand a CPU-allocated result back as eagerc).
at::Tensor device_alias_of_cpu(const at::Tensor& t);

}  // namespace eagerc::device
