"""Public entry points: `capture` and `capture_stats` (eagerc/capture/__init__.py imports this
module on the first call)."""
from .captured import Captured

LIFT_AFTER = 3  # records of one function before its float arguments become graph inputs


def capture(fn=None, *, dynamic=None, backend=None):
    """See eagerc.capture.capture (the public entry point, which imports this module lazily)."""
    if fn is None:
        return lambda f: capture(f, dynamic=dynamic, backend=backend)
    lift_after = {None: LIFT_AFTER, True: 0, False: None}[dynamic]
    return Captured(fn, backend, lift_after)


def capture_stats(captured):
    """See eagerc.capture.capture_stats."""
    if not isinstance(captured, Captured):
        raise TypeError(f"capture_stats expects what eagerc.capture returned, got "
                        f"{type(captured).__name__}")
    out = captured.stats.report()
    out["records"] = len(captured.cache)
    if out["split_runs"]:
        out["split"] = dict(captured.split_stats())
    return out
