"""What warm_cache did, as data and as a table a reader can add up."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class WarmReport:
    device: str
    ops_found: int = 0        # distinct ATen ops the model sends to the device
    calls: int = 0            # distinct calls (op + argument metadata) replayed
    cached: int = 0           # calls that compiled nothing: kernels cached already, or none needed
    compiled: int = 0         # kernels compiled
    compiled_on_confirm: int = 0  # kernels only the real forward of confirm=True reached
    failed: list = dataclasses.field(default_factory=list)  # (op, call, reason)
    discovery_stopped: str | None = None  # why the fake run ended early, if it did
    workers: int = 0
    cluster: str | None = None  # the Ray cluster's address, where it compiled
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Whether discovery ran the whole model (forward, and with train its backward and
        step); False: calls after the point it stopped were not warmed."""
        return self.discovery_stopped is None

    @property
    def calls_failed(self) -> int:
        """Distinct calls with at least one failure (a call can fail for several reasons)."""
        return len({(op, call) for op, call, _ in self.failed})

    @property
    def calls_compiled(self) -> int:
        """Calls that compiled at least one kernel and did not fail: every replayed call is
        exactly one of nothing to compile, compiled, failed."""
        return max(0, self.calls - self.cached - self.calls_failed)

    def __str__(self) -> str:
        rows = [("device", self.device),
                ("ops found", f"{self.ops_found} distinct ATen ops, found by running the model on fake tensors"),
                ("calls replayed", f"{self.calls} distinct calls (op + argument sizes/dtypes/strides) = "
                                   f"{self.cached} with nothing to compile + {self.calls_compiled} compiled + "
                                   f"{self.calls_failed} failed"),
                ("nothing to compile", "the call's kernels were in the cache already, or it needs none "
                                       "(views and the device runtime run natively)"),
                ("kernels compiled", f"{self.compiled}, by the {self.calls_compiled} calls that compiled (a call is "
                                     "replayed in both size classes, single-threaded and parallel, each "
                                     "its own kernel)")]
        if self.compiled_on_confirm:
            rows.append(("kernels compiled by the confirming real run", self.compiled_on_confirm))
        workers = self.workers or "none (compiled in this process)"
        if self.cluster is not None:
            workers = f"tasks on the Ray cluster {self.cluster!r}, up to {self.workers} at once"
        rows += [("workers", workers),
                 ("wall time", f"{self.seconds:.1f} s")]
        width = max(len(k) for k, _ in rows)
        lines = ["eagerc.warm_cache"]
        if self.discovery_stopped:
            lines += [f"  DISCOVERY STOPPED EARLY {self.discovery_stopped}",
                      "  The calls after that point were not found and not compiled: the first "
                      "real run compiles them. Fix the cause, or pass confirm=True to compile them "
                      "with one real forward."]
        lines += [f"  {k:<{width}}  {v}" for k, v in rows]
        if self.failed:
            lines.append("  failed (op | call | reason):")
            lines += [f"    {op} | {call} | {reason}" for op, call, reason in self.failed]
        return "\n".join(lines)
