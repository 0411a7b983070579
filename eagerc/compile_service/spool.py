"""The compile service's folder: what the caller and the service process share.

Standard library only: the service process (daemon.py) imports this module without torch
or eagerc. One folder per service, under the kernel cache::

    <kernel cache>/compile-service/<identity>/
        service.lock     held (flock, exclusive) by the live service; its pid inside
        service.log      the service's and its workers' output (see cap_log)
        service.log.1    the log's previous part
        queued/<id>.job  a job (a pickled CallDescription), written atomically by a caller
        running/<id>.job taken by the service (renamed: one taker)
        done/<id>.json   the job's outcome: {"ok": true} or {"ok": false, "why": "..."}

A job's id names its kernel (a digest of its entry key: kind, device, op, signature; the
folder names the settings), so two processes missing the same signature queue it once,
and each sees the one outcome.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os

QUEUED, RUNNING, DONE = "queued", "running", "done"
LOCK, LOG = "service.lock", "service.log"
# Past this size the log's lines move to service.log.1 (the previous part replaced): the
# two files together stay under about twice this, whatever the service's age.
LOG_MAX_BYTES = 2 * 1024 * 1024
# A failed job's reason when the caller is to ask again with scalar values in its key
# (the lifted scalars did not trace; the replay compiled the key with values).
SPECIALIZE_VALUES = "specialize values"


def make_folders(folder: str) -> None:
    for name in (QUEUED, RUNNING, DONE):
        os.makedirs(os.path.join(folder, name), exist_ok=True)


def write_atomically(path: str, data: bytes) -> None:
    """Readers see the whole file or none (a rename within the folder)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def job_path(folder: str, where: str, job_id: str) -> str:
    return os.path.join(folder, where, job_id + (".json" if where == DONE else ".job"))


def finish(folder: str, job_id: str, ok: bool, why: str = "") -> None:
    write_atomically(job_path(folder, DONE, job_id),
                     json.dumps({"ok": ok, "why": why[:2000]}).encode())


def outcome(folder: str, job_id: str) -> dict | None:
    """The finished job's outcome, or None while it is not finished."""
    try:
        with open(job_path(folder, DONE, job_id), "rb") as f:
            return json.loads(f.read() or b"{}")
    except (FileNotFoundError, ValueError):
        return None


def finished_ids(folder: str) -> set:
    try:
        return {name[:-5] for name in os.listdir(os.path.join(folder, DONE)) if name.endswith(".json")}
    except FileNotFoundError:
        return set()


def service_alive(folder: str) -> bool:
    """Whether a service holds the folder's lock (a shared lock is refused while it does)."""
    try:
        fd = os.open(os.path.join(folder, LOCK), os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        return e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def cap_log(folder: str, max_bytes: int = LOG_MAX_BYTES) -> bool:
    """Once the service's log is past `max_bytes`: its newest lines (those that start in
    its last `max_bytes`) move to service.log.1, replacing the previous part, and it goes
    on empty. True when they moved.

    Moved by copy and truncation, not by renaming: the service and its workers write
    through descriptors they inherited, opened for append (client.py), which go on writing
    at the start of the truncated file. A line written between the read and the truncation
    (microseconds apart) is lost."""
    path = os.path.join(folder, LOG)
    try:
        if os.path.getsize(path) <= max_bytes:
            return False
        with open(path, "r+b") as f:
            # From the byte before the newest max_bytes: the lines that start in them.
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes - 1))
            tail = f.read()
            f.truncate(0)
        write_atomically(path + ".1", tail[tail.find(b"\n") + 1:])
    except OSError:
        return False  # the log is the service's least concern
    return True
