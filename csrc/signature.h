// The signature of one call: what is specialized into a compiled kernel (the cache key)
// and what is passed to it at run time (tensors and lifted scalars).
//
// Specialized: dtype, device, rank, 0/1 sizes, stride order and contiguity,
// 16-byte alignment, the parallel class (numel above ATen's grain size), and
// the values of ints that shape the computation (dim, int[] dims, keepdim...).
// Symbolic: every other size and stride, and value scalars (alpha, fill values,
// clamp bounds), which are runtime inputs, checked by the artifact's guard; a value
// scalar equal to 0 or 1 is specialized, as sizes 0 and 1 are.
#pragma once
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

#include "arg_kinds.h"
#include "runtime_layout.h"

namespace eagerc {

// One runtime input of a compiled graph, in the order its placeholders appear.
struct RuntimeInput {
  const at::Tensor* tensor = nullptr;  // null for a lifted scalar
  c10::Scalar scalar;
};

struct CallSignature {
  std::string key;                           // specialized part, the cache key
  c10::SmallVector<RuntimeInput, 8> inputs;  // graph inputs, in placeholder order
  c10::SmallVector<int64_t, 32> ints;        // guard values: sizes, strides, offsets, int scalars
  c10::SmallVector<double, 4> floats;        // guard values: float scalars
  bool parallel = false;                     // largest tensor at or above the grain size
  const char* unsupported = nullptr;         // set when this call cannot be compiled
};

// Elements above which ATen parallelizes (at::internal::GRAIN_SIZE); kernels for
// smaller calls are compiled single-threaded so they pay no OpenMP fork.
constexpr int64_t kParallelGrain = 32768;

// warm_cache compiles both size classes of a call on host memory, so inputs of other
// sizes compile nothing: 'S' or 'P' forces the class of this thread's signatures that
// count host tensors, 0 restores the size rule.
void set_forced_size_class(char size_class);

// Fills `sig` from the op's arguments (the top `plan.kinds.size()` stack entries).
// With `specialize_values`, value scalars go into the key instead of being lifted.
// With `layout` (the miss path only), also records where each runtime input came from.
void compute_signature(const OpPlan& plan, const torch::jit::Stack& stack,
                       bool specialize_values, CallSignature* sig,
                       std::vector<RuntimeSlot>* layout = nullptr);

// The same key and runtime inputs as compute_signature, for aten::convolution's typed
// arguments (no boxed stack: its four int lists would each be a heap-allocated c10::List).
// tests/test_signature_key.py checks that both give the same bytes.
void compute_convolution_signature(const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor* bias, c10::SymIntArrayRef stride,
                                   c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                   bool transposed, c10::SymIntArrayRef output_padding,
                                   const c10::SymInt& groups, bool specialize_values,
                                   CallSignature* sig);

// The same for aten::mm and aten::addmm's typed arguments (csrc/unboxed_mm.cpp), pinned
// to the boxed key's bytes by tests/test_unboxed_mm.py.
void compute_mm_signature(const at::Tensor& self, const at::Tensor& mat2, bool specialize_values,
                          CallSignature* sig);
void compute_addmm_signature(const at::Tensor& self, const at::Tensor& mat1,
                             const at::Tensor& mat2, const c10::Scalar& beta,
                             const c10::Scalar& alpha, bool specialize_values,
                             CallSignature* sig);

}  // namespace eagerc
