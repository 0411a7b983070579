"""Garbage collections pause the monitor run of their thread: finalizers the collector runs
inside an instruction of the program are not the program's code (see `_gc_start`)."""
import gc
import threading

from . import active_monitor

# The monitor run a collection on this thread paused (.monitor).
_paused = threading.local()


def _gc_start(phase, info):
    """A garbage collection pauses the monitor run of its thread (gc.callbacks).

    The collector runs finalizers (`__del__`, weakref callbacks, generators closed) of
    whatever garbage is pending, inside whichever instruction allocated past the threshold:
    with a monitor run in progress, an instruction of the program. That code is not the
    program's: other objects' clean-up, run at a point that depends on the whole process's
    allocation history. Watched, its reads went into the record's guard (a guard that then
    failed on the next identical call: a re-record, in a test only in full-suite runs), its
    native calls could stop capture, its torch calls went into the graph. Paused like an
    annotated call (suspend: no frame watched, no instruction handled; opaque: no torch call
    recorded) until the collection ends (`_gc_stop`). Collections on other threads pause
    nothing here."""
    if phase != "start":
        return
    mon = active_monitor.current()
    _paused.monitor = mon
    if mon is not None:
        mon.suspend += 1
        mon.opaque += 1


def _gc_stop(phase, info):
    if phase != "stop":
        return
    mon = getattr(_paused, "monitor", None)
    _paused.monitor = None
    if mon is not None:
        mon.suspend -= 1
        mon.opaque -= 1


def seat_gc_callbacks():
    """`_gc_start` first and `_gc_stop` last in gc.callbacks: other callbacks are Python
    code the collector runs too, and must run paused."""
    cbs = gc.callbacks
    if cbs[:1] != [_gc_start] or cbs[-1:] != [_gc_stop]:
        for cb in (_gc_start, _gc_stop):
            while cb in cbs:
                cbs.remove(cb)
        cbs.insert(0, _gc_start)
        cbs.append(_gc_stop)


seat_gc_callbacks()
