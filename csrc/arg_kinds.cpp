#include "arg_kinds.h"

#include <ATen/core/jit_type.h>

namespace eagerc {

ArgKind classify_argument(const c10::Argument& arg, std::string* why) {
  const c10::TypePtr& type = arg.real_type() ? arg.real_type() : arg.type();
  auto kind = type->kind();
  using K = c10::TypeKind;
  if (kind == K::TensorType) return ArgKind::Tensor;
  if (kind == K::NumberType) return ArgKind::Scalar;
  if (kind == K::FloatType) return ArgKind::Float;
  if (kind == K::IntType || kind == K::SymIntType || kind == K::BoolType ||
      kind == K::StringType || kind == K::ScalarTypeType ||
      kind == K::LayoutType || kind == K::DeviceObjType ||
      kind == K::MemoryFormatType) {
    return ArgKind::Specialized;
  }
  if (kind == K::ListType) {
    auto elem = type->castRaw<c10::ListType>()->getElementType();
    if (elem->kind() == K::TensorType) return ArgKind::TensorList;
    if (elem->kind() == K::IntType || elem->kind() == K::SymIntType ||
        elem->kind() == K::BoolType) {
      return ArgKind::Specialized;
    }
    if (elem->kind() == K::OptionalType &&
        elem->castRaw<c10::OptionalType>()->getElementType()->kind() == K::TensorType) {
      return ArgKind::OptionalTensorList;
    }
  }
  if (kind == K::OptionalType) {
    auto elem = type->castRaw<c10::OptionalType>()->getElementType();
    auto ek = elem->kind();
    if (ek == K::TensorType) return ArgKind::OptionalTensor;
    if (ek == K::NumberType) return ArgKind::OptionalScalar;
    if (ek == K::FloatType) return ArgKind::OptionalFloat;
    if (ek == K::GeneratorType) return ArgKind::Generator;
    if (ek == K::IntType || ek == K::SymIntType || ek == K::BoolType ||
        ek == K::StringType || ek == K::ScalarTypeType || ek == K::LayoutType ||
        ek == K::DeviceObjType || ek == K::MemoryFormatType) {
      return ArgKind::Specialized;
    }
    if (ek == K::ListType) {
      auto inner = elem->castRaw<c10::ListType>()->getElementType()->kind();
      if (inner == K::IntType || inner == K::SymIntType) return ArgKind::Specialized;
    }
  }
  if (why) *why = "argument '" + arg.name() + "' of type " + type->str();
  return ArgKind::Unsupported;
}

OpPlan make_op_plan(const c10::FunctionSchema& schema) {
  OpPlan plan;
  for (const auto& arg : schema.arguments()) {
    std::string why;
    ArgKind k = classify_argument(arg, &why);
    if (k == ArgKind::Unsupported && plan.unsupported.empty()) plan.unsupported = why;
    plan.kinds.push_back(k);
    plan.mutated.push_back(arg.alias_info() && arg.alias_info()->isWrite());
    plan.writes = plan.writes || plan.mutated.back();
  }
  plan.num_returns = schema.returns().size();
  for (const auto& ret : schema.returns()) {
    auto kind = ret.type()->kind();
    if (kind == c10::TypeKind::ListType &&
        ret.type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType) {
      plan.returns_tensor_list = true;
    } else if (kind != c10::TypeKind::TensorType && plan.unsupported.empty()) {
      plan.unsupported = "return of type " + ret.type()->str();
    }
    int alias = -1;
    if (ret.alias_info()) {
      // A return that aliases an argument: it is that argument (in-place / out=),
      // or a view, which the caller keeps native.
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const auto& a = schema.arguments()[i];
        if (a.alias_info() && a.alias_info()->beforeSets() == ret.alias_info()->beforeSets()) {
          alias = static_cast<int>(i);
          break;
        }
      }
    }
    plan.return_alias.push_back(alias);
  }
  if (plan.returns_tensor_list && plan.num_returns != 1 && plan.unsupported.empty()) {
    plan.unsupported = "several returns including a Tensor[]";
  }
  return plan;
}

}  // namespace eagerc
