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
