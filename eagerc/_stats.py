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


# Totals shown in Stats' first line only where they are not zero (the common four always).
_RARE = (("aliased", "aliased"), ("interim", "interim (served while compiling)"),
         ("externs", "externs"), ("host_round_trips", "host round trips"),
         ("background_compiles", "background compiles"))


class Stats(dict):
    """What ``eagerc.stats()`` returns: the plain dict of counters existing callers index
    (``stats()["compiles"]``, ``stats()["ops"][name]["fallback_reasons"]``), printed as a
    table a reader takes in at once: the totals, then one row per op.

        >>> s = Stats({"hits": 3, "misses": 1, "compiles": 1, "disk_loads": 0, "fallbacks": 0,
        ...            "compile_seconds": 2.0, "ops": {"aten::abs@CPU": {"hits": 3, "misses": 1,
        ...            "compiles": 1, "disk_loads": 0, "fallbacks": 0, "fallback_reasons": {}}}})
        >>> print(s)  # doctest: +NORMALIZE_WHITESPACE
        eagerc.stats(): 4 calls: 3 hits, 1 miss -> 1 compiled (2.0 s), 0 loaded from disk; 0 fallbacks
          op         device  calls  hits  compiled  from disk  fallbacks
          aten::abs  cpu         4     3         1          0          0
    """

    def __str__(self) -> str:
        g = self.get
        calls = g("hits", 0) + g("misses", 0)
        head = (f"eagerc.stats(): {calls} calls: {g('hits', 0)} hits, {g('misses', 0)} "
                f"{'miss' if g('misses', 0) == 1 else 'misses'} -> {g('compiles', 0)} compiled "
                f"({g('compile_seconds', 0.0):.1f} s), {g('disk_loads', 0)} loaded from disk; "
                f"{g('fallbacks', 0)} fallbacks")
        head += "".join(f", {g(k)} {words}" for k, words in _RARE if g(k))
        ops = g("ops") or {}
        if not ops:
            return head + "\n  (no op reached an enabled device since the counters were reset)"
        from eagerc.targets import served_device

        rows = []
        for key, s in sorted(ops.items()):
            op, _, dispatch_key = key.partition("@")
            device = served_device(dispatch_key).lower() if dispatch_key else ""
            rows.append([op, device, s.get("hits", 0) + s.get("misses", 0), s.get("hits", 0),
                         s.get("compiles", 0), s.get("disk_loads", 0), s.get("fallbacks", 0)]
                        + [s.get(k, 0) for k, _ in _RARE[:1] if g(k)])
        header = ["op", "device", "calls", "hits", "compiled", "from disk", "fallbacks"] + \
            [k for k, _ in _RARE[:1] if g(k)]
        widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
        lines = [head]
        for r in [header] + rows:
            lines.append("  " + "  ".join(f"{str(v):<{w}}" if i < 2 else f"{str(v):>{w}}"
                                          for i, (v, w) in enumerate(zip(r, widths))).rstrip())
        for key, s in sorted(ops.items()):
            for reason, n in (s.get("fallback_reasons") or {}).items():
                lines.append(f"  {key.partition('@')[0]} fell back {n}x: {reason.splitlines()[0][:160]}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the table too
        printer.text(str(self))
