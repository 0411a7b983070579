"""Every ATen overload the dispatcher knows, and the static facts about each that decide
how coverage treats it before anything runs (composite, runtime, random, no CPU kernel).

    >>> from eagerc.coverage.enumerate import all_overloads, select
    >>> "aten::add.Tensor" in all_overloads()
    True
    >>> select(["aten::add.Tensor", "aten::abs*"], all_overloads())[:2]
    ['aten::abs', 'aten::abs.out']
    >>> "aten::_softmax" in select(["softmax*"], all_overloads())
    True
"""
from __future__ import annotations

import dataclasses
import fnmatch

import torch

from eagerc.aten_meta import overload_by_name


def all_overloads() -> list:
    """Qualified names of every aten overload registered with the dispatcher, sorted."""
    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def select(patterns, names) -> list:
    """Names matching any glob in `patterns` ("aten::" is optional in a pattern). A glob
    whose op name does not start with "_" also matches the one-underscore form of a name:
    ``softmax*`` matches ``aten::_softmax`` and ``aten::_softmax_backward_data`` (the
    private ops a public one calls, and the kernels that compile); ``_softmax*`` only
    those; dunder names (``aten::__and__``) only a glob that spells them out."""
    if not patterns:
        return list(names)
    globs = [p if p.startswith("aten::") else "aten::" + p for p in patterns]
    public = [g for g in globs if not g[len("aten::"):].startswith("_")]

    def matches(n: str) -> bool:
        if any(fnmatch.fnmatchcase(n, g) for g in globs):
            return True
        base = n[len("aten::"):]
        return (base.startswith("_") and not base.startswith("__")
                and any(fnmatch.fnmatchcase("aten::" + base[1:], g) for g in public))

    return [n for n in names if matches(n)]


def family(name: str) -> str:
    """The op family a chart groups by: the first word of the base name, so
    ``aten::_foreach_add_.List`` -> ``foreach``, ``aten::linalg_svd`` -> ``linalg``,
    ``aten::add.out`` -> ``add``."""
    base = name.split("::", 1)[-1].split(".", 1)[0].strip("_")
    return base.split("_", 1)[0] or base


@dataclasses.dataclass
class OpFacts:
    """What the dispatcher and the schema say about one overload."""

    name: str
    composite_implicit: bool   # decomposes above the backend key: never reaches the device
    has_cpu_kernel: bool       # CPU eager (the reference) can run it
    random: bool               # tagged nondeterministic_seeded: values are not compared
    view: bool                 # returns an alias of an input
    undefined_values: bool     # outputs are uninitialized memory (empty*, new_empty*)
    tags: tuple

    @property
    def family(self) -> str:
        return family(self.name)


def _has(name: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)


def facts(name: str) -> OpFacts:
    op = overload_by_name(name)
    schema = op._schema
    tags = tuple(sorted(str(t).rsplit(".", 1)[-1] for t in op.tags))
    short = name.split("::", 1)[-1]
    return OpFacts(
        name=name,
        composite_implicit=_has(name, "CompositeImplicitAutograd"),
        has_cpu_kernel=_has(name, "CPU") or _has(name, "CompositeExplicitAutograd")
        or _has(name, "CompositeExplicitAutogradNonFunctional"),
        random="nondeterministic_seeded" in tags,
        view=any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns),
        undefined_values=short.split(".")[0].lstrip("_").startswith(("empty", "new_empty"))
        or short.startswith(("resize", "_resize")),
        tags=tags,
    )
