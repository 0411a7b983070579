"""Names of ATen overloads and the storage a tensor's metadata reaches: the small facts
the resolver, the compiler, targets, background compiles and warm_cache all need."""
from __future__ import annotations

import torch


def qualified_name(op) -> str:
    """``aten::add.Tensor`` for torch.ops.aten.add.Tensor (no suffix for ``.default``)."""
    overload = op._overloadname
    return op._schema.name + ("" if overload == "default" else f".{overload}")


def overload_by_name(name: str):
    """The OpOverload a qualified name names (``aten::add.Tensor``, ``aten::abs``)."""
    namespace, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")


def storage_extent(shape, stride, storage_offset: int) -> int:
    """Elements of storage a tensor with this metadata reaches (0 when it has none)."""
    if any(n == 0 for n in shape):
        return 0
    return storage_offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def callable_for(op, args):
    """What runs `op` on `args` (schema-ordered) from Python: the overload itself, or its
    packet where a Tensor argument holds a number.

    A Python number passed where the schema says Tensor reaches a kernel as a 0-dim
    "wrapped number" tensor (``remainder.Scalar`` calls ``remainder.Tensor`` so), and
    reaches Python as the number. Calling the overload with it raises for most ops
    ("Expected a value of type 'Tensor'"; add and mul alone accept numbers); the packet
    picks the overload that takes it as a Scalar, which ATen defines as the same call.

        >>> import torch
        >>> x = torch.arange(4)
        >>> callable_for(torch.ops.aten.remainder.Tensor, (x, 3))(x, 3)
        tensor([0, 1, 2, 0])
    """
    for arg, value in zip(op._schema.arguments, args):
        if isinstance(arg.type, torch.TensorType) and isinstance(
                value, (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):
            return op.overloadpacket
    return op
