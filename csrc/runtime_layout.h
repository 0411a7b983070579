// Where each runtime input of a compiled kernel comes from, and where its guard values go.
//
// C++ owns this layout; Python reads it (eagerc._C.RuntimeSlot) instead of mirroring it.
// Runtime inputs are collected walking the op's arguments left to right: a Tensor is one
// input, Tensor[] / Tensor?[] contribute each present element, a value scalar one input
// unless values are specialized. The guard arrays are filled in the same order:
// `ints` gets each tensor's sizes, strides and storage offset and each int scalar's value;
// `floats` gets each float scalar's value.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <vector>

namespace eagerc {

enum class SlotKind : uint8_t { Tensor, Int, Float };

struct RuntimeSlot {
  SlotKind kind = SlotKind::Tensor;
  int arg = 0;         // schema argument index (graph input index for graphs)
  int item = -1;       // index inside a Tensor[] / Tensor?[] argument, or -1
  int64_t first = 0;   // first guard slot: ints[] for tensors and int scalars, floats[] for floats
  int64_t dim = 0;     // tensors: rank

  // Guard slots of a tensor's size d, stride d and storage offset.
  int64_t size_slot(int64_t d) const { return first + d; }
  int64_t stride_slot(int64_t d) const { return first + dim + d; }
  int64_t offset_slot() const { return first + 2 * dim; }
  // How many ints[] entries this input fills.
  int64_t int_slots() const {
    return kind == SlotKind::Tensor ? 2 * dim + 1 : (kind == SlotKind::Int ? 1 : 0);
  }
};

// Appends a tensor's guard values (sizes, strides, storage offset) to `ints`, in the
// order RuntimeSlot::size_slot / stride_slot / offset_slot name them.
template <class Ints>
void append_tensor_guard_values(const at::Tensor& t, Ints* ints) {
  for (int64_t s : t.sizes()) ints->push_back(s);
  for (int64_t s : t.strides()) ints->push_back(s);
  ints->push_back(t.storage_offset());
}

// The layout of a graph whose inputs are all tensors of the given ranks.
std::vector<RuntimeSlot> tensor_inputs_layout(const std::vector<int64_t>& ranks);

}  // namespace eagerc
