"""A compile service worker ends with its service, however the service ends.

Standard library only: the service (daemon.py) passes :func:`follow` to its worker pool as
the workers' initializer. A worker otherwise outlives a service that was killed (SIGKILL,
SIGTERM: no ``finally`` runs, so the pool is never shut down): it holds both ends of the
pool's pipes itself, never sees them close, and waits for its next job forever.

Two watches, so that either alone suffices: on Linux the kernel sends the worker SIGKILL
when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and everywhere a thread of the worker
checks ``os.getppid()`` every ``POLL_S`` (an orphan's parent becomes another process). The
kernel's watch fires when the thread that started the worker ends, not the process: the
service starts its workers from its main thread (ProcessPoolExecutor.submit), which lives
as long as the service. Inductor's own compile workers, started by a worker, watch their
parent the same way (torch/_inductor/compile_worker/__main__.py).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

POLL_S = 0.5
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def follow(parent_pid: int) -> None:
    """In a worker: end this process when the process `parent_pid` (its service) ends."""
    _ask_the_kernel(signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)  # the service died before the kernel's watch was set
    threading.Thread(target=_watch, args=(parent_pid,), name="eagerc-service-lifeline",
                     daemon=True).start()


def _ask_the_kernel(sig: int) -> bool:
    """Linux: `sig` to this process when its parent dies. False elsewhere (the thread's
    watch alone)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The interpreter's own symbols, libc's among them (find_library would run ldconfig).
        return ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    os._exit(1)
