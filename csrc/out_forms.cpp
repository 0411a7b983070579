#include "out_forms.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange_native.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/eye_native.h>
#include <ATen/ops/linspace_native.h>
#include <ATen/ops/logspace_native.h>
#include <ATen/ops/range_native.h>

#include "kernel_holder.h"

namespace eagerc {
namespace {

// A meta tensor with `t`'s sizes, strides and dtype: shape logic runs on it, no memory.
at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

c10::IValue meta_value(const c10::IValue& v) {
  if (v.isTensor()) return meta_like(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(meta_like(t));
    return out;
  }
  if (v.isList()) {
    auto list = v.toList();
    bool tensors = false;
    for (const c10::IValue& e : list) tensors = tensors || e.isTensor();
    if (!tensors) return v;  // an int[] keeps its IntList tag
    c10::impl::GenericList out(list.elementType());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(meta_like(e.toTensor())) : e);
    return out;
  }
  return v;
}

// A factory's shape logic: ATen's native kernel (shared by its CPU and Meta registrations)
// returns right after resizing a meta out, with eager's checks and warning on the way.
void factory_shape(OutShape kind, const c10::IValue* a, at::Tensor& out) {
  switch (kind) {
    case OutShape::Arange: at::native::arange_out(a[0].toScalar(), a[1].toScalar(), a[2].toScalar(), out); return;
    case OutShape::Range: at::native::range_out(a[0].toScalar(), a[1].toScalar(), a[2].toScalar(), out); return;
    case OutShape::RangeNoStep: at::native::range_out_no_step(a[0].toScalar(), a[1].toScalar(), out); return;
    case OutShape::EyeN: at::native::eye_out_cpu(a[0].toInt(), out); return;
    case OutShape::EyeNM: at::native::eye_out_cpu(a[0].toInt(), a[1].toInt(), out); return;
    case OutShape::Linspace: at::native::linspace_out(a[0].toScalar(), a[1].toScalar(), a[2].toInt(), out); return;
    case OutShape::Logspace:
      at::native::logspace_out(a[0].toScalar(), a[1].toScalar(), a[2].toInt(), a[3].toDouble(), out);
      return;
    default: TORCH_INTERNAL_ASSERT(false, "not a factory");
  }
}

// Whether `a` and `b` are the very same view of one memory: an elementwise kernel reading
// element i of one and writing element i of the other sees what eager's kernel sees.
bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.is_same(b) ||
         (a.storage().is_alias_of(b.storage()) && a.storage_offset() == b.storage_offset() &&
          a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
          a.is_neg() == b.is_neg() && a.is_conj() == b.is_conj());
}

}  // namespace

OutShape out_shape_kind(const std::string& name, const std::vector<int>& out_args) {
  if (out_args.empty()) return OutShape::None;
  if (name == "aten::arange.start_out") return OutShape::Arange;
  if (name == "aten::range.out") return OutShape::Range;
  if (name == "aten::range.out_") return OutShape::RangeNoStep;
  if (name == "aten::eye.out") return OutShape::EyeN;
  if (name == "aten::eye.m_out") return OutShape::EyeNM;
  if (name == "aten::linspace.out") return OutShape::Linspace;
  if (name == "aten::logspace.out") return OutShape::Logspace;
  return OutShape::Meta;
}

bool resize_outs_as_eager(const c10::OperatorHandle& op, OutShape kind, const std::vector<int>& out_args,
                          size_t n, const torch::jit::Stack& stack) {
  const size_t base = stack.size() - n;
  c10::SmallVector<at::Tensor, 2> metas;
  try {
    if (kind == OutShape::Meta) {
      torch::jit::Stack call;
      call.reserve(n);
      for (size_t i = 0; i < n; ++i) call.push_back(meta_value(stack[base + i]));
      for (int index : out_args) metas.push_back(call[index].isTensor() ? call[index].toTensor() : at::Tensor());
      ActivityGuard guard;
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &call);
    } else {
      const c10::IValue& out = stack[base + out_args.at(0)];
      if (!out.isTensor() || !out.toTensor().defined()) return false;
      metas.push_back(meta_like(out.toTensor()));
      factory_shape(kind, &stack[base], metas[0]);
    }
  } catch (const std::exception&) {
    return false;  // eager's shape logic raised: eager's kernel raises it on the normal path
  }
  bool changed = false;
  ActivityGuard guard;  // resize_ is the device's own
  for (size_t r = 0; r < out_args.size(); ++r) {
    const c10::IValue& v = stack[base + out_args[r]];
    if (!v.isTensor() || !metas[r].defined()) continue;
    at::Tensor out = v.toTensor();
    const at::Tensor& shaped = metas[r];
    if (!out.defined() || (out.sizes() == shaped.sizes() && out.strides() == shaped.strides())) continue;
    if (out.sizes() != shaped.sizes()) out.resize_(shaped.sizes());
    if (out.strides() != shaped.strides()) out.as_strided_(shaped.sizes(), shaped.strides());
    changed = true;
  }
  return changed;
}

WriteOverlap written_overlap(const OpPlan& plan, const torch::jit::Stack& stack) {
  const size_t n = plan.kinds.size();
  const size_t base = stack.size() - n;
  size_t written_args = 0;
  WriteOverlap result = WriteOverlap::None;
  for (size_t i = 0; i < n; ++i) {
    if (!plan.mutated[i] || !stack[base + i].isTensor()) continue;
    ++written_args;
    const at::Tensor& written = stack[base + i].toTensor();
    if (!written.defined() || written.numel() == 0) continue;
    if (at::has_internal_overlap(written) == at::MemOverlap::Yes) return WriteOverlap::Other;
    bool other_overlap = false;
    for (size_t j = 0; j < n && !other_overlap; ++j) {
      if (j == i) continue;
      for_each_tensor(stack[base + j], [&](const at::Tensor& other) {
        // Other storages never overlap (checked first: ATen calls any non-dense pair
        // "too hard", a strided slice and an unrelated tensor included).
        if (other_overlap || !written.storage().is_alias_of(other.storage())) return;
        if (same_view(written, other)) {
          result = WriteOverlap::SameView;
        } else if (at::get_overlap_status(written, other) != at::MemOverlapStatus::No) {
          other_overlap = true;
        }
      });
    }
    if (other_overlap) return WriteOverlap::Other;
  }
  // Two written arguments (frexp's mantissa and exponent): a kernel writing one before
  // it reads the input the other aliases would read its own output.
  if (result == WriteOverlap::SameView && written_args != 1) return WriteOverlap::Other;
  return result;
}

}  // namespace eagerc
