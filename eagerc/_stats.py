"""Counters kept on the Python side of the miss path; hits/misses/fallbacks live in C++."""
from __future__ import annotations

import collections
import threading

_lock = threading.Lock()
# ready_on_miss: C++ counted a miss, but the call took the kernel a background compile had
# just made ready (eagerc/per_op/background.py); stats() reports it as the hit it is for the caller.
_per_op: dict = collections.defaultdict(
    lambda: {"compiles": 0, "disk_loads": 0, "compile_seconds": 0.0, "background_compiles": 0,
             "ready_on_miss": 0})


def count(op_key: str, field: str, amount=1) -> None:
    with _lock:
        _per_op[op_key][field] += amount


def snapshot() -> dict:
    with _lock:
        return {k: dict(v) for k, v in _per_op.items()}


def reset() -> None:
    with _lock:
        _per_op.clear()
