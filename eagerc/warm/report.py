"""What warm_cache did, as data and as a table."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class WarmReport:
    device: str
    ops_found: int = 0        # distinct ATen ops the model sends to the device
    calls: int = 0            # distinct calls (op + argument metadata) replayed
    cached: int = 0           # calls whose kernels were all in the cache already
    compiled: int = 0         # kernels compiled
    compiled_on_confirm: int = 0  # kernels only the real forward of confirm=True reached
    failed: list = dataclasses.field(default_factory=list)  # (op, call, reason)
    discovery_stopped: str | None = None  # why the fake run ended early, if it did
    workers: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        rows = [("device", self.device), ("ops found", self.ops_found),
                ("calls replayed", self.calls), ("calls already cached", self.cached),
                ("kernels compiled", self.compiled),
                ("compiled by the confirming run", self.compiled_on_confirm),
                ("failed", len(self.failed)),
                ("workers", self.workers or "in process"), ("wall time", f"{self.seconds:.1f} s")]
        width = max(len(k) for k, _ in rows)
        lines = ["eagerc.warm_cache"] + [f"  {k:<{width}}  {v}" for k, v in rows]
        if self.discovery_stopped:
            lines.append(f"  discovery stopped early: {self.discovery_stopped}")
        if self.failed:
            lines.append("  failed (op | call | reason):")
            lines += [f"    {op} | {call} | {reason}" for op, call, reason in self.failed]
        return "\n".join(lines)
