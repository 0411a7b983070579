"""The compile service process: ``python daemon.py <folder> <workers> <idle seconds>``.

Started detached by the first caller that needs it (eagerc/compile_service/client.py), in
a session of its own, so it outlives that caller. It holds the folder's lock while it
lives (a second service started at the same moment finds the lock held and exits), takes
queued jobs oldest first, runs each in one of ``workers`` worker processes (spawned
interpreters that import torch and eagerc; this process imports neither), writes each
job's outcome, and exits after ``idle seconds`` with nothing queued or running. Its log
(its and its workers' output) stays bounded: spool.cap_log.

A worker that dies (a crash in the compiler, memory) fails the jobs it was running; the
next jobs get new workers. The workers end with the service, however it ends (SIGKILL
included: lifeline.py). A job found in running/ at start was being compiled when an
earlier service stopped: it is failed, not retried (it may be what stopped it).
"""
from __future__ import annotations

import concurrent.futures
import errno
import fcntl
import multiprocessing
import os
import sys
import time

import lifeline  # this file's folder is sys.path[0]: run as a script, never as eagerc's module
import spool

_POLL_S = 0.05
_KEEP_OUTCOMES_S = 24 * 3600.0
_KEEP_PARTS_S = 600.0  # a file being written is written within this


def _compile(path: str):
    """In a worker process: one job (imports eagerc on the worker's first job)."""
    from eagerc.compile_service.worker import compile_job

    return compile_job(path)


def _take_lock(folder: str):
    fd = os.open(os.path.join(folder, spool.LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    # A caller asking whether a service lives takes a shared lock for a moment: retry.
    for _ in range(40):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            time.sleep(0.05)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return fd
    os.close(fd)
    return None


def _tidy(folder: str) -> None:
    """Fail what an earlier service left running; drop outcomes older than a day, and the
    half-written files of processes killed while writing (spool.write_atomically)."""
    for name in os.listdir(os.path.join(folder, spool.RUNNING)):
        if name.endswith(".job"):
            spool.finish(folder, name[:-4], False, "the compile service stopped while compiling it")
            _remove(os.path.join(folder, spool.RUNNING, name))
    _remove_older(os.path.join(folder, spool.DONE), _KEEP_OUTCOMES_S)
    _remove_older(os.path.join(folder, spool.QUEUED), _KEEP_PARTS_S, ".tmp")


def _remove_older(where: str, seconds: float, suffix: str = "") -> None:
    """Remove the files of `where` (those named ...`suffix`) last written over `seconds` ago."""
    now = time.time()
    for name in os.listdir(where):
        if name.endswith(suffix):
            path = os.path.join(where, name)
            try:
                if now - os.path.getmtime(path) > seconds:
                    os.remove(path)
            except OSError:
                pass


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _queued(folder: str) -> list:
    """Queued job file names, oldest first."""
    where = os.path.join(folder, spool.QUEUED)
    found = []
    for name in os.listdir(where):
        if name.endswith(".job"):
            try:
                found.append((os.path.getmtime(os.path.join(where, name)), name))
            except OSError:
                continue  # taken meanwhile
    return [name for _, name in sorted(found)]


def serve(folder: str, workers: int, idle_s: float) -> int:
    spool.make_folders(folder)
    lock = _take_lock(folder)
    if lock is None:
        return 0  # another service serves this folder
    try:
        # The callers' own work comes first: on a machine with few cores a compile beside
        # a caller's parallel kernels (OpenMP threads meeting at barriers) slows them most.
        os.nice(19)
    except OSError:
        pass
    _tidy(folder)
    spool.cap_log(folder)
    print(f"eagerc compile service {os.getpid()}: {workers} workers, exits after {idle_s:g} s idle",
          flush=True)
    pool = None
    in_flight: dict = {}  # future -> job id
    last_busy = time.monotonic()
    try:
        while True:
            spool.cap_log(folder)  # one stat per round while it is under its cap
            for name in _queued(folder):
                if len(in_flight) >= workers:
                    break
                running = os.path.join(folder, spool.RUNNING, name)
                try:
                    os.replace(os.path.join(folder, spool.QUEUED, name), running)
                except FileNotFoundError:
                    continue
                if pool is None:
                    # Its workers end with this process, however it ends (lifeline.py).
                    pool = concurrent.futures.ProcessPoolExecutor(
                        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                        initializer=lifeline.follow, initargs=(os.getpid(),))
                in_flight[pool.submit(_compile, running)] = name[:-4]
            if not in_flight:
                if time.monotonic() - last_busy > idle_s:
                    return 0
                time.sleep(_POLL_S)
                continue
            done, _ = concurrent.futures.wait(in_flight, timeout=_POLL_S,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            broken = False
            for future in done:
                job_id = in_flight.pop(future)
                try:
                    ok, why = future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    ok, why, broken = False, "the compile worker died", True
                except Exception as e:  # noqa: BLE001 - the job's failure is its outcome
                    ok, why = False, f"{type(e).__name__}: {e}"
                spool.finish(folder, job_id, ok, why)
                _remove(os.path.join(folder, spool.RUNNING, job_id + ".job"))
                print(f"{job_id}: {'ok' if ok else 'failed: ' + why.splitlines()[0] if why else 'failed'}",
                      flush=True)
            if broken:
                pool.shutdown(wait=False, cancel_futures=True)
                pool = None
            last_busy = time.monotonic()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        os.close(lock)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
