"""The one artifact type: what the compiler builds, the store keeps and the loader reads.

inductor_wrapper.build_artifact makes it (library and the metadata the loader needs), the
per-op compiler (compile/op.py) or capture's graph path (graph_kernels.py) names it and times
it, and the compile/cache service (cache.py) stores it and loads it as a `_C` artifact.
"""
from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass
class Artifact:
    library: bytes          # the shared library
    metadata: dict          # JSON-serializable: num_outputs, guard, and what a loader needs
    description: str = ""   # for the log line, e.g. "aten::abs(float32[s,s] C)"
    seconds: float = 0.0    # how long the compile took

    @property
    def num_outputs(self) -> int:
        return int(self.metadata["num_outputs"])

    @property
    def guard_source(self) -> str:
        return self.metadata["guard"]


_BINDING = re.compile(r"^  const int64_t (\w+) = I\[(\d+)\];$", re.M)
_TERM = re.compile(r"^  if \(!\((\S+) == (\S+)\)\) return 0;$", re.M)
_SLOT = re.compile(r"I\[(\d+)\]")
_CONSTANT = re.compile(r"int64_t\((-?\d+)LL\)")


def pinned_terms(guard: str) -> list[tuple[int, int]]:
    """The terms of a guard (``metadata["guard"]``, as eagerc/compile/guard_source.py writes
    it; this reads its lines without importing it, sympy or Inductor) which compare one int slot with a
    constant (``I[5] == 64``, or ``s3 == 64`` where ``s3`` is ``I[5]``), as (slot, value)
    pairs. The kernel holder checks them before it calls the kernel's library (an op's
    variants under one key differ mostly in such a size); they are the guard's own terms,
    so this adds no condition."""
    bound = {m.group(1): int(m.group(2)) for m in _BINDING.finditer(guard)}
    pinned = []
    for m in _TERM.finditer(guard):
        for lhs, rhs in ((m.group(1), m.group(2)), (m.group(2), m.group(1))):
            slot, constant = _SLOT.fullmatch(lhs), _CONSTANT.fullmatch(rhs)
            index = int(slot.group(1)) if slot else bound.get(lhs)
            if index is not None and constant:
                pinned.append((index, int(constant.group(1))))
                break
    return pinned
