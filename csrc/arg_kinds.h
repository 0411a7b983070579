// How each schema argument enters a compiled kernel. One enum, shared by the
// signature (what is specialized) and the runtime-input builder (what is passed);
// runtime_layout.h tells Python the resulting order.
#pragma once
#include <ATen/core/function_schema.h>
#include <string>
#include <vector>

namespace eagerc {

enum class ArgKind : uint8_t {
  Tensor,          // runtime input; dtype, rank, layout class, 0/1 sizes specialized
  OptionalTensor,  // Tensor?: None is specialized
  TensorList,      // Tensor[]: length specialized, every element a runtime input
  OptionalTensorList,  // Tensor?[] (index): None positions specialized
  Scalar,          // value scalar: runtime input, its type (int/float/bool) specialized
  OptionalScalar,
  Float,           // float / float?: value scalar, runtime input
  OptionalFloat,
  Specialized,     // int, int?, int[], SymInt[], bool, str, ScalarType?, ...: value in key
  Generator,       // Generator?: only None is supported
  Unsupported,
};

// Classifies one argument type. `why` is filled for Unsupported.
ArgKind classify_argument(const c10::Argument& arg, std::string* why);

// The plan for one operator: the kind of every argument, whether its
// outputs can be served (all returns Tensor / Tensor[]), and which
// arguments are mutated (in-place self, out=).
struct OpPlan {
  std::vector<ArgKind> kinds;
  std::vector<bool> mutated;     // per argument: written by the op (alias_info is_write)
  bool writes = false;           // some argument is written
  std::vector<int> return_alias; // per return: index of the argument it aliases, or -1
  bool returns_tensor_list = false;
  size_t num_returns = 0;
  std::string unsupported;       // non-empty: why this op cannot be compiled
};

OpPlan make_op_plan(const c10::FunctionSchema& schema);

}  // namespace eagerc
