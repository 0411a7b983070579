// aten::mm and aten::addmm called unboxed, in override mode on CPU and CUDA and on the
// eagerc device (host or GPU memory). Through the boxed holder every call boxes its arguments
// onto a stack, computes the signature from IValues and unboxes the result: about 0.5 us
// of a 10 us 64x64 mm, whose MKL kernel leaves no margin. These kernels take the typed
// arguments: on an L1 hit they compute the same signature (compute_mm_signature /
// compute_addmm_signature, the boxed key's bytes, pinned by tests/test_unboxed_mm.py) and
// run the artifact, on aliases of the memory's home device when its kernels call that
// device's ATen functions (as the boxed holder's compiled_on_cpu_aliases does: cuBLAS on
// GPU memory). Anything else (a miss, a call from inside a kernel, a CPU tensor among a
// device call's arguments, a symbolic scalar) goes to the boxed holder.
#pragma once
#include <torch/library.h>

#include <memory>

#include "op_state.h"

namespace eagerc {

torch::CppFunction unboxed_mm_kernel(std::shared_ptr<OpState> state);
torch::CppFunction unboxed_addmm_kernel(std::shared_ptr<OpState> state);

}  // namespace eagerc
