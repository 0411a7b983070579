"""Compile locks: one compile at a time in a process, one compile per key across processes.

``compile_lock``: make_fx's module patcher (torch.fx's CURRENT_PATCHER) and Inductor's
configuration and virtualized state are process-global: two threads tracing at once corrupt
each other ("CURRENT_PATCHER is None in finally block"), and that failure says nothing about
either call. Compiles take seconds; serializing them costs little (warm_cache compiles in
worker processes), and a hit never takes this lock. Reentrant: a compile may trace inside a
trace.

:func:`key_lock`: processes missing the same key compile it once; the others wait and load
it. A wait is bounded and never silent. The holder writes an owner file next to the lock
(pid, host, what it compiles) and a heartbeat thread touches it twice a second. A waiter keeps
waiting only while the owner makes progress: its pid alive and its heartbeat fresh. A
holder that was stopped (SIGSTOP, a debugger), or whose heartbeat stopped, is given up on
after ``EAGERC_LOCK_STALL_S`` seconds (default 10, at least 2), and the waiter compiles the key itself,
with one WARNING. A live holder is waited for at most ``EAGERC_LOCK_WAIT_S`` (default 120),
and a wait longer than the stall bound is logged once at INFO.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time

compile_lock = threading.RLock()

log = logging.getLogger("eagerc")

HEARTBEAT_S = 0.5
# A stall bound below a few heartbeats would give up on holders that are fine.
MIN_STALL_S = 4 * HEARTBEAT_S
_POLL_S = 0.2


class _Heartbeat:
    """One daemon thread per process touching the owner files of the locks it holds."""

    def __init__(self):
        self._paths: set[str] = set()
        self._lock = threading.Lock()
        self._pid = None

    def add(self, path: str) -> None:
        with self._lock:
            self._paths.add(path)
            if self._pid != os.getpid():  # none yet, or a forked child: threads do not fork
                self._pid = os.getpid()
                self._paths = {path}
                threading.Thread(target=self._run, name="eagerc-lock-heartbeat",
                                 daemon=True).start()

    def remove(self, path: str) -> None:
        with self._lock:
            self._paths.discard(path)

    def _run(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                paths = list(self._paths)
            for path in paths:
                with contextlib.suppress(OSError):
                    os.utime(path)


_heartbeat = _Heartbeat()


def _host() -> str:
    """This machine and pid namespace: a pid is only meaningful within both."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{namespace}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _owner(path: str) -> tuple[dict, float] | None:
    """The owner file's fields and its heartbeat's age in seconds, or None if unreadable."""
    try:
        with open(path) as f:
            fields = json.load(f)
        return fields, time.time() - os.stat(path).st_mtime
    except (OSError, ValueError):
        return None


def _no_progress(owner, waited: float, stall_s: float) -> str | None:
    """Why the holder is not making progress, or None while it is."""
    if owner is None:
        # A holder that has not written its owner file yet does so right after acquiring;
        # one that never does (stopped in between, or a build without heartbeats) stalls.
        return f"no heartbeat for {waited:.0f} s" if waited > stall_s else None
    fields, age = owner
    if fields.get("host") == _host() and not _alive(int(fields.get("pid", 0))):
        return f"pid {fields.get('pid')} is gone"
    if age > stall_s:
        return f"pid {fields.get('pid')} has not sent a heartbeat for {age:.0f} s"
    return None


@contextlib.contextmanager
def key_lock(path: str, what: str, stall_s: float, wait_s: float):
    """Hold the inter-process lock ``path`` while compiling ``what``; yields True when held,
    False when this process compiles without it (the holder made no progress, the wait
    passed ``wait_s``, or no lock file can be made here, e.g. a read-only cache)."""
    import filelock

    owner_path = path[:-len(".lock")] + ".owner" if path.endswith(".lock") else path + ".owner"
    lock = filelock.FileLock(path)
    held = _acquire(lock, owner_path, what, stall_s, wait_s)
    if held:
        try:
            with open(owner_path + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "host": _host(), "what": what}, f)
            os.replace(owner_path + ".tmp", owner_path)
            _heartbeat.add(owner_path)
        except OSError as e:
            log.debug("eagerc: no owner file for a compile lock (%s)", e)
    try:
        yield held
    finally:
        if held:
            _heartbeat.remove(owner_path)
            with contextlib.suppress(OSError):
                os.unlink(owner_path)
            lock.release()


def _acquire(lock, owner_path: str, what: str, stall_s: float, wait_s: float) -> bool:
    import filelock

    stall_s = max(stall_s, MIN_STALL_S)
    start = time.monotonic()
    said_waiting = False
    # A verdict must hold on two polls in a row: a new holder writes its owner file just
    # after acquiring, and the file it replaces may be a dead holder's.
    strikes = 0
    while True:
        try:
            lock.acquire(timeout=_POLL_S)
            return True
        except filelock.Timeout:
            pass
        except OSError as e:
            log.debug("eagerc: no process lock for %s (%s)", what, e)
            return False
        waited = time.monotonic() - start
        owner = _owner(owner_path)
        why = _no_progress(owner, waited, stall_s)
        strikes = strikes + 1 if why is not None else 0
        holder = f"pid {owner[0].get('pid')}" if owner else "another process"
        if strikes >= 2:
            log.warning("eagerc: %s holds the compile lock of %s but makes no progress (%s); "
                        "compiling it here (EAGERC_LOCK_STALL_S=%g)", holder, what, why,
                        stall_s)
            return False
        if waited > wait_s:
            log.warning("eagerc: waited %.0f s for %s to compile %s; compiling it here "
                        "(EAGERC_LOCK_WAIT_S=%g)", waited, holder, what, wait_s)
            return False
        if waited > stall_s and not said_waiting:
            said_waiting = True
            log.info("eagerc: waiting for %s (alive, heartbeat fresh) to compile %s, %.0f s so "
                     "far (at most EAGERC_LOCK_WAIT_S=%g)", holder, what, waited, wait_s)
