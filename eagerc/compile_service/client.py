"""The caller's side of the compile service: which service serves this process, queueing
a job, learning that it finished, and starting the service when none lives.

Every call is cheap enough for a miss path: queueing hands the job to a thread of this
process that writes its file (the file system calls, a third of a millisecond a job on a
busy machine, are never the caller's; the thread's Python between them is a few
microseconds under the GIL), and a process's exit waits for the jobs still unwritten;
asking about a job reads the folder of finished jobs at most every ``POLL_S`` seconds
(one listing for all of a process's jobs) and asks whether the service lives at most
every ``ALIVE_S`` (the first job of a process starts it when none lives).
"""
from __future__ import annotations

import atexit
import functools
import getpass
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from eagerc import _config
from eagerc.compile_service import spool
from eagerc.environment_memo import until_environment_changes

POLL_S = 0.02
ALIVE_S = 0.5
# A service that does not hold its lock this long after its start did not start (an
# interpreter that cannot run the service): its jobs are the callers' to compile.
START_GRACE_S = 10.0
STARTS_PER_FOLDER = 3

_DAEMON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "daemon.py")
# Variables that choose what a worker compiles, or which eagerc and torch it imports.
_COMPILER_VARIABLES = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "PYTHONPATH",
                       "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")


def _eagerc_parent() -> str:
    """The folder this process imports eagerc from (what the workers must import)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def service_environment() -> dict:
    """The service's environment: the caller's, compiling now, importing this eagerc."""
    env = dict(os.environ)
    env[_config.COMPILE_ENV] = "now"
    # The folder the service is named by (identity), whatever the service's working
    # folder and whether Inductor has written the variable yet.
    env[INDUCTOR_CACHE_ENV] = inductor_cache_folder(env)
    paths = [_eagerc_parent()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # A vendor's device reaches the workers as it reaches any process: `import torch` loads
    # it through its torch.backends entry point (docs/vendor.md). One a script registers
    # by hand is not served there: its jobs fail, and its misses compile in the caller.
    return env


def identity(env: dict) -> dict:
    """What makes two processes' services one: the same interpreter, eagerc (its folder and
    its kernels' key format: a service started before the format changed would file its
    kernels where the caller no longer looks), cache and settings (the service's own knobs
    aside)."""
    from eagerc.kernel_key import FORMAT_VERSION

    own = (_config.COMPILE_ENV, _config.COMPILE_WORKERS_ENV, _config.SERVICE_IDLE_ENV)
    return {"python": sys.executable, "eagerc": _eagerc_parent(), "key_format": FORMAT_VERSION,
            **{k: v for k, v in sorted(env.items()) if _names_the_service(k) and k not in own},
            INDUCTOR_CACHE_ENV: inductor_cache_folder(env)}


INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def inductor_cache_folder(env) -> str:
    """Inductor's cache folder in a process with environment `env`, as Inductor works it
    out (torch/_inductor/runtime/cache_dir_utils.py: cache_dir), without importing it.

    Inductor writes the answer into os.environ when it first needs its cache: named by
    the variable as read, a process's service would change name then, and a process
    that leaves the variable unset would not share a service with one that sets it to
    the default."""
    given = env.get(INDUCTOR_CACHE_ENV)
    return os.path.abspath(given) if given is not None else _inductor_default_cache_folder()


@functools.lru_cache(maxsize=None)
def _inductor_default_cache_folder() -> str:
    # Worked out once: Inductor works it out once too (then sets the variable), and the
    # temporary folder is the process's (tempfile keeps its first answer).
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def _names_the_service(variable: str) -> bool:
    return variable.startswith(("EAGERC_", "TORCHINDUCTOR_", "OMP_")) or variable in _COMPILER_VARIABLES


_folders: dict = {}  # the variables that name a folder (and HOME) -> the service's folder


def folder_for(env) -> str:
    """The folder of the service that serves processes with environment `env`."""
    return _this_process_folder() if env is os.environ else _folder_for(env)


@until_environment_changes
def _this_process_folder() -> str:
    # Asked at every miss queued: worked out again only when os.environ changed (reading
    # its variables decodes each, about 50 µs a miss on a busy machine).
    return _folder_for(os.environ)


def _folder_for(env) -> str:
    # Only the variables that name the folder are read, with HOME, where the default
    # cache lives.
    items = tuple((k, env[k]) for k in env if _names_the_service(k) or k == "HOME")
    found = _folders.get(items)
    if found is None:
        from kernel_cache.layout import default_directory

        digest = hashlib.sha256(json.dumps(identity(dict(items)), sort_keys=True).encode()).hexdigest()[:16]
        found = os.path.join(default_directory(), "compile-service", digest)
        if len(_folders) > 64:
            _folders.clear()
        _folders[items] = found
    return found


# How long a process's exit waits for the jobs it queued to be written.
EXIT_FLUSH_S = 10.0


class Client:
    """One per process (:func:`client`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._finished: dict = {}   # folder -> (polled at, finished job ids)
        self._alive: dict = {}      # folder -> (asked at, alive)
        self._starts: dict = {}     # folder -> [start times]
        self._writes_changed = threading.Condition(threading.Lock())
        self._to_write: list = []   # (folder, job id, data) submitted, not yet taken
        self._unwritten: set = set()  # (folder, job id) submitted, its file not yet written
        self._unqueued: dict = {}   # (folder, job id) -> why it could not be queued
        self._writer = None         # the thread writing them (started at the first job)
        self._made: set = set()     # folders made by this process

    def submit(self, folder: str, job_id: str, data: bytes) -> bool:
        """Queue a job (once across processes), without waiting for its file: a thread of
        this process writes it. False when the service cannot be reached (the caller
        compiles the call itself); a job whose file cannot be written fails
        (:meth:`outcome`), and the caller compiles its call at its next miss."""
        if folder not in self._made:
            try:
                spool.make_folders(folder)  # where the service's start writes its log
            except OSError:
                return False
            self._made.add(folder)
        if not self.ensure_service(folder):
            return False
        with self._writes_changed:
            self._to_write.append((folder, job_id, data))
            self._unwritten.add((folder, job_id))
            self._unqueued.pop((folder, job_id), None)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_jobs, name="eagerc-job-writer",
                                                daemon=True)
                self._writer.start()
                atexit.register(self.flush, EXIT_FLUSH_S)
            self._writes_changed.notify()
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Until every job submitted so far is written (True), or `timeout` seconds."""
        with self._writes_changed:
            return self._writes_changed.wait_for(lambda: not self._unwritten, timeout)

    def _write_jobs(self) -> None:
        """The writer thread: each submitted job's file."""
        while True:
            with self._writes_changed:
                self._writes_changed.wait_for(lambda: self._to_write)
                batch, self._to_write = self._to_write, []
            unqueued = {}
            for folder, job_id, data in batch:
                try:
                    try:
                        _queue(folder, job_id, data)
                    except FileNotFoundError:  # the folder was removed since it was made
                        spool.make_folders(folder)
                        _queue(folder, job_id, data)
                except Exception as e:  # noqa: BLE001 - the job fails; the thread writes the next
                    unqueued[(folder, job_id)] = f"its job could not be queued ({e})"
            with self._lock:
                for folder, _, _ in batch:
                    self._finished.pop(folder, None)
            with self._writes_changed:
                self._unqueued.update(unqueued)
                self._unwritten.difference_update((f, j) for f, j, _ in batch)
                self._writes_changed.notify_all()

    def _after_fork_in_child(self) -> None:
        """A forked child has no writer thread: it starts its own at its first job (the
        parent writes the jobs it submitted)."""
        self._lock = threading.Lock()
        self._writes_changed = threading.Condition(threading.Lock())
        self._to_write, self._unwritten, self._writer = [], set(), None
        self._made = set()

    def outcome(self, folder: str, job_id: str) -> dict | None:
        """The job's outcome once finished ({"ok": bool, "why": str}); None while it is
        being written, queued or compiling. A job that could not be queued, or whose
        service died before finishing it, fails."""
        # Asked on every call of a signature whose job is pending: between two listings of
        # the folder it reads what the last one found, without taking the lock (a dict's
        # item is read and replaced whole; two threads listing at once list the same; a
        # set's membership is one step under the GIL).
        if self._unwritten and (folder, job_id) in self._unwritten:
            return None
        if self._unqueued:
            why = self._unqueued.get((folder, job_id))
            if why is not None:
                return {"ok": False, "why": why}
        now = time.monotonic()
        polled = self._finished.get(folder)
        if polled is None or now - polled[0] >= POLL_S:
            polled = (now, spool.finished_ids(folder))
            with self._lock:
                self._finished[folder] = polled
        if job_id in polled[1]:
            return spool.outcome(folder, job_id) or {"ok": False, "why": "unreadable outcome"}
        if not self.ensure_service(folder, now):
            return {"ok": False, "why": "the compile service is not running"}
        return None

    def ensure_service(self, folder: str, now: float | None = None) -> bool:
        """Whether a service serves `folder` (started here when none does, at most
        STARTS_PER_FOLDER times per process). A service that was just started counts as
        serving for START_GRACE_S, before it holds its lock."""
        if now is None:
            now = time.monotonic()
        asked, alive = self._alive.get(folder, (-1.0, False))
        if now - asked < ALIVE_S and alive:
            return True  # asked lately (read without the lock, as outcome reads)
        with self._lock:
            asked, alive = self._alive.get(folder, (-1.0, False))
            if now - asked < ALIVE_S and alive:
                return True
            alive = spool.service_alive(folder)
            starts = self._starts.setdefault(folder, [])
            if not alive and starts and now - starts[-1] < START_GRACE_S:
                alive = True  # starting
            elif not alive and len(starts) < STARTS_PER_FOLDER:
                alive = self._start(folder)
                if alive:
                    starts.append(now)
            self._alive[folder] = (now, alive)
            return alive

    def _start(self, folder: str) -> bool:
        env = service_environment()
        try:
            log = open(os.path.join(folder, spool.LOG), "ab")
        except OSError:
            return False
        try:
            subprocess.Popen(
                [sys.executable, _DAEMON, folder, str(_config.compile_workers()),
                 str(_config.service_idle_seconds())],
                cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        except OSError:
            return False
        finally:
            log.close()
        return True


def _queue(folder: str, job_id: str, data: bytes) -> None:
    """The job's file in queued/, unless the job is queued or running already."""
    queued = spool.job_path(folder, spool.QUEUED, job_id)
    if os.path.exists(queued) or os.path.exists(spool.job_path(folder, spool.RUNNING, job_id)):
        return
    # An outcome left by an earlier job of this id (its kernel is not in the store any
    # more, or a process gave up on it) is not this job's.
    try:
        os.remove(spool.job_path(folder, spool.DONE, job_id))
    except FileNotFoundError:
        pass
    spool.write_atomically(queued, data)


_client = Client()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_client._after_fork_in_child)


def client() -> Client:
    return _client
