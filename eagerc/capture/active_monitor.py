"""The monitor run in progress on each thread: set by `Monitor.run` (monitor.py) and looked up
by code the program's calls reach outside the monitor's own handlers: garbage collections
pause it (gc_pause.py), numpy calls record into it (numpy_ops.py)."""
import threading

_local = threading.local()


def current():
    """The monitor run in progress on this thread, or None."""
    return getattr(_local, "monitor", None)


def replace(monitor):
    """Make `monitor` (or None) this thread's run; returns the one it replaces, which the
    caller puts back when its run ends (runs nest: a captured call inside an annotated one)."""
    outer = current()
    _local.monitor = monitor
    return outer
