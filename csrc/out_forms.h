// In-place and out= calls around a compiled kernel: an out= that eager resizes is resized
// here first (the kernel, compiled for outs of the result's shape, then writes it), and a
// written argument that is the very same view as an input (x.mul_(x), logical_not_'s
// out=self) is told apart from other overlaps.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

#include "arg_kinds.h"

namespace eagerc {

// Whose shape logic sizes an op's out=: a factory's (arange, range, eye, linspace,
// logspace: ATen's own native kernel, which stops after resizing a meta tensor, so no
// Python meta runs), the op's Meta kernel (any other out= op), or none (no outs).
enum class OutShape : uint8_t { None, Arange, Range, RangeNoStep, EyeN, EyeNM, Linspace, Logspace, Meta };

OutShape out_shape_kind(const std::string& name, const std::vector<int>& out_args);

// Resizes the outs of the call (the last `n` values of `stack`) as eager's kernel would:
// its shape logic, checks and resize warning run on meta copies of the arguments, and each
// out whose meta copy changed shape or strides is resized (resize_, as_strided_ for
// strides) to match. Returns whether an out changed. Returns false, touching nothing, when
// eager's shape logic raised (eager's kernel raises it again on the normal path).
bool resize_outs_as_eager(const c10::OperatorHandle& op, OutShape kind, const std::vector<int>& out_args,
                          size_t n, const torch::jit::Stack& stack);

// How the written arguments (in-place self, out=) of a call overlap memory.
enum class WriteOverlap : uint8_t {
  None,      // no written argument overlaps itself or another argument
  SameView,  // one written argument, and every overlap is an input that is that very view
  Other,     // anything else: eager's kernel decides (raises, or handles it)
};

WriteOverlap written_overlap(const OpPlan& plan, const torch::jit::Stack& stack);

}  // namespace eagerc
