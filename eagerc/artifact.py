"""The one artifact type: what the compiler builds, the store keeps and the loader reads.

inductor_wrapper.build_artifact makes it (library and the metadata the loader needs), the
per-op compiler (compile/op.py) or capture's graph path (graph_kernels.py) names it and times
it, and the compile/cache service (cache.py) stores it and loads it as a `_C` artifact.
"""
from __future__ import annotations

import dataclasses


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
