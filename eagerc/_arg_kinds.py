"""How each schema argument enters a compiled kernel: the Python mirror of csrc/arg_kinds.

The C++ holder and the compiler must agree on the *order* of runtime inputs: walk the
arguments left to right; a Tensor is one input, Tensor[] / Tensor?[] contribute each
present element, a value scalar (Scalar, float) one input unless values are specialized.
They must also agree on the guard arrays (see :func:`runtime_layout`).
"""
from __future__ import annotations

import enum

import torch

# Elements above which ATen parallelizes; smaller calls get single-threaded kernels.
PARALLEL_GRAIN = 32768


class ArgKind(enum.Enum):
    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_TENSOR_LIST = "Tensor?[]"
    SCALAR = "Scalar"
    OPTIONAL_SCALAR = "Scalar?"
    FLOAT = "float"
    OPTIONAL_FLOAT = "float?"
    SPECIALIZED = "specialized"
    GENERATOR = "Generator?"


def classify(arg: torch._C.Argument) -> ArgKind:
    t = arg.type
    if isinstance(t, torch._C.TensorType):
        return ArgKind.TENSOR
    if isinstance(t, torch._C.NumberType):
        return ArgKind.SCALAR
    if isinstance(t, torch._C.FloatType):
        return ArgKind.FLOAT
    if isinstance(t, torch._C.OptionalType):
        e = t.getElementType()
        if isinstance(e, torch._C.TensorType):
            return ArgKind.OPTIONAL_TENSOR
        if isinstance(e, torch._C.NumberType):
            return ArgKind.OPTIONAL_SCALAR
        if isinstance(e, torch._C.FloatType):
            return ArgKind.OPTIONAL_FLOAT
        if str(e) == "Generator":
            return ArgKind.GENERATOR
        return ArgKind.SPECIALIZED
    if isinstance(t, torch._C.ListType):
        e = t.getElementType()
        if isinstance(e, torch._C.TensorType):
            return ArgKind.TENSOR_LIST
        if isinstance(e, torch._C.OptionalType) and isinstance(
            e.getElementType(), torch._C.TensorType
        ):
            return ArgKind.OPTIONAL_TENSOR_LIST
    return ArgKind.SPECIALIZED


def is_lifted_scalar(value, specialize: bool) -> bool:
    """A value scalar becomes a runtime input unless it is a bool (it picks code
    paths), 0 or 1 (specialized like sizes: alpha=1 then costs nothing), or the op
    was switched to specialized values. Mirrors add_value_scalar in csrc/signature.cpp."""
    if specialize or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value not in (0, 1)


def walk_runtime_inputs(schema: torch._C.FunctionSchema, args, specialize: bool):
    """Yields (path, value) for every runtime input in placeholder order.

    path is (arg index,) or (arg index, list index).
    """
    for i, (arg, value) in enumerate(zip(schema.arguments, args)):
        kind = classify(arg)
        if kind in (ArgKind.TENSOR, ArgKind.OPTIONAL_TENSOR):
            if value is not None:
                yield (i,), value
        elif kind in (ArgKind.TENSOR_LIST, ArgKind.OPTIONAL_TENSOR_LIST):
            for j, v in enumerate(value):
                if v is not None:
                    yield (i, j), v
        elif kind in (ArgKind.SCALAR, ArgKind.OPTIONAL_SCALAR, ArgKind.FLOAT, ArgKind.OPTIONAL_FLOAT):
            if value is not None and is_lifted_scalar(value, specialize):
                yield (i,), value


def is_parallel(runtime_inputs) -> bool:
    numels = [v.numel() for _, v in runtime_inputs if isinstance(v, torch.Tensor)]
    return max(numels, default=0) >= PARALLEL_GRAIN
