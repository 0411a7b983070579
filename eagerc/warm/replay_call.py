"""Replay one discovered call on real tensors, so the device's own dispatch compiles (or
loads) exactly the kernels a real run would reach. Runs in warm_cache's worker processes.

The tensors are allocated with the recorded sizes, strides and storage offsets (the
offset decides the alignment class of the signature); values are harmless ones (floats in
[0, 1), integers 0: valid indices, no division by zero). Each call is replayed in both
size classes of host-memory kernels (single-threaded and OpenMP), so inputs of other
sizes find a kernel too.
"""
from __future__ import annotations

import dataclasses
import time

import torch
from torch.utils._pytree import tree_map

import _eagerc as _C
from eagerc import _console
from eagerc.aten_meta import overload_by_name, storage_extent
from eagerc.per_op.registration import stats
from eagerc.warm.discover import CallSpec, TensorSpec


@dataclasses.dataclass
class ReplayResult:
    call: CallSpec
    compiled: int = 0          # kernels compiled for this call
    cached: int = 0            # kernels found in L1, on disk or in the remote tier
    failures: list = dataclasses.field(default_factory=list)  # reasons
    seconds: float = 0.0
    compile_lines: list = dataclasses.field(default_factory=list)  # the compile log lines, in order


# A call is replayed in both size classes; the two compile lines would otherwise read alike.
_SIZE_CLASS_WORDS = {"S": " [single-threaded]", "P": " [parallel]"}


def materialize(spec: TensorSpec) -> torch.Tensor:
    extent = storage_extent(spec.size, spec.stride, spec.storage_offset)
    if spec.dtype.is_floating_point or spec.dtype.is_complex:
        values = torch.rand(extent, dtype=spec.dtype)
    else:
        values = torch.zeros(extent, dtype=spec.dtype)
    base = values.to(spec.device)
    return base.as_strided(spec.size, spec.stride, spec.storage_offset)


def _unhashable(value):
    """CallSpec keeps lists as tuples (hashable); ATen wants lists back."""
    if isinstance(value, tuple) and not isinstance(value, torch.Size):
        return [_unhashable(v) for v in value]
    return value


def _fallback_reasons() -> dict:
    return {(name, reason): n for name, entry in stats()["ops"].items()
            for reason, n in entry["fallback_reasons"].items()}


def replay(call: CallSpec) -> ReplayResult:
    result = ReplayResult(call)
    start = time.perf_counter()
    try:
        op = overload_by_name(call.op)
        args = [tree_map(lambda v: materialize(v) if isinstance(v, TensorSpec) else v, _unhashable(a))
                for a in call.args]
        kwargs = {k: tree_map(lambda v: materialize(v) if isinstance(v, TensorSpec) else v,
                              _unhashable(v)) for k, v in call.kwargs}
    except Exception as e:  # noqa: BLE001
        result.failures.append(f"cannot build the arguments: {type(e).__name__}: {e}")
        return result
    before, reasons_before = stats(), _fallback_reasons()
    with _console.compile_lines() as lines:
        for size_class in ("S", "P"):
            lines.suffix = _SIZE_CLASS_WORDS[size_class]
            _C._force_size_class(size_class)
            try:
                op(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - the call's own error, reported
                result.failures.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                break
            finally:
                _C._force_size_class("")
    result.compile_lines = lines.lines
    after = stats()
    result.compiled = after["compiles"] - before["compiles"]
    result.cached = (after["disk_loads"] - before["disk_loads"]) + (after["hits"] - before["hits"])
    from eagerc.compile.known_wrong import all_reasons

    by_design = all_reasons()  # calls Inductor computes wrongly run eager's kernel
    for (name, reason), n in _fallback_reasons().items():
        if n > reasons_before.get((name, reason), 0) and reason not in by_design:
            result.failures.append(f"{name}: {reason}")
    result.seconds = time.perf_counter() - start
    return result
