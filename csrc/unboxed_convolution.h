// aten::convolution on the eagerc device, called unboxed. A compiled convolution there is
// the home device's ATen convolution run on aliases (host memory: CPU aliases, as mkldnn
// picks its backend by device type; GPU memory: CUDA aliases, as cuDNN's guard refuses
// other device types).
// Through the boxed holder, each call first boxes its four int lists into heap-allocated
// c10::Lists, and the signature, aliases and lookup then read them back. This kernel takes
// the typed arguments: on an L1 hit it makes the aliases, computes the same signature
// (compute_convolution_signature) and runs the artifact; anything else (a miss, a CPU
// tensor among the arguments, a call from inside a kernel) goes to the boxed holder.
#pragma once
#include <torch/library.h>

#include <memory>

#include "op_state.h"

namespace eagerc {

// The kernel to register for aten::convolution on a key whose memory has a home.
torch::CppFunction unboxed_convolution_kernel(std::shared_ptr<OpState> state);

}  // namespace eagerc
