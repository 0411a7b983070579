"""The compile service leaves no process behind (eagerc/compile_service/lifeline.py,
daemon.py): its workers end with it however it ends, SIGKILL included, and a service with
nothing to do exits with its workers, whatever became of the callers that queued its jobs.

Processes are found in /proc (psutil is not a dependency): the service leads a process
group of its own (a session, as the client starts it), which its workers and their
children join."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from eagerc.compile_service import client, spool

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def _group(pgid: int) -> dict:
    """pid -> command line of the live (not zombie) processes of process group `pgid`."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                # pid (comm) state ppid pgrp ...: comm may hold spaces, so after its ')'.
                state, _, group = f.read().rsplit(")", 1)[1].split()[:3]
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # it ended meanwhile
        if int(group) == pgid and state != "Z":
            found[int(name)] = command
    return found


def _start_service(folder: str, workers: int, idle_s: float) -> subprocess.Popen:
    """The service as the client starts it: detached, in a session of its own."""
    spool.make_folders(folder)
    return subprocess.Popen([sys.executable, client._DAEMON, folder, str(workers), str(idle_s)],
                            cwd=folder, env=client.service_environment(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _queue(folder: str, job_id: str) -> None:
    # Not a pickled call: the worker fails it (after importing eagerc), an outcome all the same.
    spool.write_atomically(spool.job_path(folder, spool.QUEUED, job_id), b"not a job")


def _until(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    return predicate()


def _workers(service: subprocess.Popen) -> dict:
    return {pid: command for pid, command in _group(service.pid).items()
            if pid != service.pid and "spawn_main" in command}


def test_workers_end_within_seconds_of_a_killed_service(tmp_path):
    folder = str(tmp_path / "service")
    service = _start_service(folder, workers=2, idle_s=60)
    try:
        _queue(folder, "a")
        _queue(folder, "b")
        workers = _until(lambda: len(_workers(service)) == 2, 60)
        assert workers, _group(service.pid)
    finally:
        service.send_signal(signal.SIGKILL)
        service.wait()
    # Every process the service started (its workers, multiprocessing's resource tracker).
    gone = _until(lambda: not _group(service.pid), 5)
    left = _group(service.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # the test's own leftovers, not the next test's
    assert gone, f"outlived the killed service: {left}"


def test_an_idle_service_exits_with_its_workers(tmp_path):
    folder = str(tmp_path / "service")
    service = _start_service(folder, workers=1, idle_s=0.5)
    try:
        _queue(folder, "a")
        # Its worker ran the job (imported eagerc, failed it); no caller waits for it.
        outcome = _until(lambda: spool.outcome(folder, "a"), 120)
        assert outcome is not None and outcome["ok"] is False, outcome
        assert service.wait(timeout=30) == 0
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    assert _until(lambda: not _group(service.pid), 10), f"outlived the service: {_group(service.pid)}"


def test_a_killed_callers_half_written_job_is_removed(tmp_path):
    # A caller killed between writing its job and renaming it (spool.write_atomically)
    # leaves a part no service takes: the next service to start removes it once it is old.
    folder = str(tmp_path / "service")
    spool.make_folders(folder)
    old = spool.job_path(folder, spool.QUEUED, "a") + ".4242.tmp"
    new = spool.job_path(folder, spool.QUEUED, "b") + ".4243.tmp"
    for path in (old, new):
        with open(path, "wb") as f:
            f.write(b"half a job")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    service = _start_service(folder, workers=1, idle_s=0.1)
    assert service.wait(timeout=60) == 0  # nothing queued: it exits
    assert not os.path.exists(old) and os.path.exists(new)
