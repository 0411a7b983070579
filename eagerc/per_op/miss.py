"""One L1 miss as a value: built once at the start of the miss (eagerc/per_op/resolver.py),
read by every step after it instead of a thread of parameters.

A miss is one call (its op, arguments, target, context and eager's verdict) under one
signature (its key bytes, runtime layout, size class and the variants L1 already holds).
When the lifted scalars do not trace, the same call goes on under its signature with
scalar values (``request.with_values``): a second Miss of the same call.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from eagerc.per_op.eager_rules import check_call
from eagerc.refusals import EagerRaises


class EagerVerdict:
    """Eager's check of one call, run at most once (memoized); shared by the call's
    signatures. Once it ran, `output_layouts` holds the sizes and strides of eager's
    fresh outputs (None: not run, or eager raised), which the compiled kernel keeps."""

    def __init__(self, op, args, target):
        self._call = (op, args, target)
        self._raised: EagerRaises | None = None
        self.ran = False
        self.output_layouts: tuple | None = None

    def check(self) -> None:
        """Raise EagerRaises when eager's kernel raises for the call."""
        if not self.ran:
            self.ran = True
            try:
                self.output_layouts = check_call(*self._call)
            except EagerRaises as e:
                self._raised = e
        if self._raised is not None:
            raise self._raised


# Not frozen: a frozen dataclass's __init__ costs about five times more, and a call
# answered in the interim builds one on every call until its kernel is compiled.
@dataclasses.dataclass(slots=True)
class Miss:
    """One miss of one signature (no step changes it; `job` is named from the rest of it
    as it is built, by eagerc.per_op.background.job_for)."""

    request: Any             # the holder's `_C.MissRequest` (its `admits`, `with_values`)
    op: Any                  # the OpOverload
    args: tuple              # the call's arguments, as Python values
    layout: list             # the call's runtime inputs (`_C.RuntimeSlot`s)
    parallel: bool           # the size class: a parallel kernel, or a single-threaded one
    target: Any              # the served device's eagerc.targets.Target
    key: Any                 # the kernel's eagerc.kernel_key.CacheKey
    variants: frozenset      # variant ids L1 already holds for the key (skipped)
    verdict: EagerVerdict    # eager's check of the call, run at most once
    transient: bool          # inside a dispatch mode or no_dispatch(): nothing compiles
    job: Any                 # background compilation's name for its job; None: compiled now
    stat_key: str            # "aten::abs@CPU", the counters' key

    def admits(self, kernel) -> bool:
        """Whether `kernel`'s guard passes for this call (a stored variant may not)."""
        return self.request.admits(kernel)
