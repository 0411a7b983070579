"""Bounded, visible waits: a compile lock held by a process that makes no progress, and one
warning per cause for a cache or compiler disk that cannot be written.

A holder that was stopped (SIGSTOP stands in for a debugger or a frozen machine) stops its
heartbeat: a waiter gives up on it after EAGERC_LOCK_STALL_S and compiles the key itself. A
holder that is alive and beating is waited for, and its kernel loaded, not compiled twice.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import eagerc
from eagerc.compile import lock as compile_lock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A process that takes the compile lock of aten::abs's key and then holds it (a compile that
# takes long); it says HELD once it holds the lock, then either sleeps forever or, with
# RELEASE_AFTER, finishes the compile that many seconds later.
_HOLDER = textwrap.dedent("""
    import contextlib, os, sys, time, torch, eagerc
    from eagerc.compile import lock

    real = lock.key_lock

    @contextlib.contextmanager
    def slow_key_lock(path, what, stall_s, wait_s):
        with real(path, what, stall_s, wait_s) as held:
            print("HELD", held, flush=True)
            time.sleep(float(os.environ.get("RELEASE_AFTER", "1000")))
            yield held

    lock.key_lock = slow_key_lock
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(8, 8))
    print("DONE", eagerc.stats()["compiles"], flush=True)
""")

_WAITER = textwrap.dedent("""
    import json, torch, eagerc
    x = torch.randn(8, 8)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        y = torch.abs(x)
    assert torch.equal(y, x.abs())
    s = eagerc.stats()
    print(json.dumps({"compiles": s["compiles"], "disk_loads": s["disk_loads"]}))
""")


def _env(cache, **extra):
    return dict(os.environ, EAGERC_CACHE_DIR=str(cache), PYTHONPATH=REPO,
                **{k: str(v) for k, v in extra.items()})


def _start_holder(cache, **extra):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], env=_env(cache, **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = holder.stdout.readline()  # blocks until the holder holds the lock
    assert line.split() == ["HELD", "True"], (line, holder.stderr.read() if holder.poll() else "")
    return holder


def _run_waiter(cache, **extra):
    import json

    done = subprocess.run([sys.executable, "-c", _WAITER], env=_env(cache, **extra),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow
def test_a_stopped_lock_holder_is_given_up_on(tmp_path):
    holder = _start_holder(tmp_path / "cache")
    try:
        os.kill(holder.pid, signal.SIGSTOP)  # its heartbeat stops with it
        counts, stderr = _run_waiter(tmp_path / "cache", EAGERC_LOCK_STALL_S=2,
                                     EAGERC_LOCK_WAIT_S=600)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert counts == {"compiles": 1, "disk_loads": 0}  # the waiter compiled it itself
    assert stderr.count("makes no progress") == 1, stderr
    assert f"pid {holder.pid} has not sent a heartbeat" in stderr
    assert "EAGERC_LOCK_STALL_S=2" in stderr


@pytest.mark.slow
def test_a_live_lock_holder_is_waited_for_and_its_kernel_loaded(tmp_path):
    # The holder beats its heartbeat for 5 s, longer than the stall bound, then compiles.
    holder = _start_holder(tmp_path / "cache", RELEASE_AFTER=5)
    counts, stderr = _run_waiter(tmp_path / "cache", EAGERC_LOCK_STALL_S=2,
                                 EAGERC_LOCK_WAIT_S=600)
    out, _ = holder.communicate(timeout=600)
    assert out.split()[-2:] == ["DONE", "1"]
    assert counts == {"compiles": 0, "disk_loads": 1}  # waited, then loaded the holder's kernel
    assert "makes no progress" not in stderr


@pytest.fixture
def lock_path(tmp_path):
    return str(tmp_path / "k.lock")


def _hold_in_child(lock_path):
    code = textwrap.dedent(f"""
        import time
        from eagerc.compile.lock import key_lock
        with key_lock({lock_path!r}, "aten::abs", 60, 600) as held:
            print("HELD", held, flush=True)
            time.sleep(1000)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=REPO))
    assert child.stdout.readline().split() == ["HELD", "True"]
    return child


@pytest.mark.slow  # the wait bound again, with a stopped holder process (the live holder's stays)
def test_waiter_bound_on_a_stopped_holder(lock_path, caplog):
    child = _hold_in_child(lock_path)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        with caplog.at_level(logging.INFO, logger="eagerc"):
            with compile_lock.key_lock(lock_path, "aten::abs", 1.5, 600) as held:
                assert held is False  # compiles without the lock
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    [line] = [r for r in caplog.records if "makes no progress" in r.getMessage()]
    assert line.levelno == logging.WARNING and f"pid {child.pid}" in line.getMessage()


def test_waiter_gives_up_after_the_wait_bound_on_a_live_holder(lock_path, caplog):
    child = _hold_in_child(lock_path)
    try:
        with caplog.at_level(logging.INFO, logger="eagerc"):
            with compile_lock.key_lock(lock_path, "aten::abs", 2.0, 4.0) as held:
                assert held is False
    finally:
        child.kill()
        child.wait()
    messages = [r.getMessage() for r in caplog.records]
    # Visible while it waits (alive, beating: not a stall), then bounded.
    assert sum("waiting for pid" in m for m in messages) == 1
    assert sum("EAGERC_LOCK_WAIT_S=4" in m and "compiling it here" in m for m in messages) == 1
    assert not any("makes no progress" in m for m in messages)


def test_lock_released_by_a_dead_holder_is_taken(lock_path):
    child = _hold_in_child(lock_path)
    child.kill()
    child.wait()
    with compile_lock.key_lock(lock_path, "aten::abs", 60, 600) as held:
        assert held is True


def test_lock_settings_are_checked(monkeypatch):
    from eagerc import _config

    assert _config.lock_stall_seconds() == 10.0 and _config.lock_wait_seconds() == 120.0
    monkeypatch.setenv("EAGERC_LOCK_STALL_S", "3.5")
    assert _config.lock_stall_seconds() == 3.5
    monkeypatch.setenv("EAGERC_LOCK_STALL_S", "soon")
    with pytest.raises(ValueError, match="EAGERC_LOCK_STALL_S='soon': expected a positive"):
        _config.lock_stall_seconds()


# -- one warning per cause -----------------------------------------------------------------

def _warnings(caplog, text):
    return [r for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def test_a_full_cache_warns_once_and_every_call_is_right(fresh_cache, monkeypatch, caplog):
    import kernel_cache.disk

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(kernel_cache.disk, "atomic_write", full)
    x = torch.randn(5, 5)
    with caplog.at_level(logging.WARNING), eagerc.enabled(
            "cpu", ops=["aten::abs", "aten::neg", "aten::exp"]):
        got = [(torch.abs(x), torch.neg(x), torch.exp(x)) for _ in range(3)]
    for a, n, e in got:
        torch.testing.assert_close((a, n, e), (x.abs(), -x, x.exp()))
    assert eagerc.stats()["compiles"] == 3 and eagerc.stats()["fallbacks"] == 0
    assert len(_warnings(caplog, "could not store")) == 1, caplog.text
    assert "No space left on device" in _warnings(caplog, "could not store")[0].getMessage()
    assert not _warnings(caplog, "index"), caplog.text  # not mistaken for index trouble


def test_a_full_compiler_disk_warns_once(fresh_cache, monkeypatch, caplog):
    from eagerc.compile import op as op_compiler
    from eagerc.refusals import CompileError, IN_PROCESS

    def no_space(*args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise CompileError("Inductor failed: InductorError: OSError: [Errno 28] No space "
                               "left on device", IN_PROCESS) from e

    monkeypatch.setattr(op_compiler, "compile_op", no_space)  # what Inductor raised here
    x = torch.randn(5, 5)
    with caplog.at_level(logging.INFO), eagerc.enabled("cpu", ops=["aten::abs", "aten::neg"]):
        got = [(torch.abs(x), torch.neg(x)) for _ in range(3)]
    for a, n in got:
        assert torch.equal(a, x.abs()) and torch.equal(n, -x)
    full = _warnings(caplog, "a disk the compiler writes to is full")
    assert len(full) == 1, caplog.text


_FULL_INDUCTOR_DIR = textwrap.dedent("""
    import torch, eagerc
    x = torch.randn(4, 4)
    with eagerc.enabled("cpu", ops=["aten::abs", "aten::neg", "aten::exp"]):
        got = [(torch.abs(x), torch.neg(x), torch.exp(x)) for _ in range(3)]
    assert all(torch.equal(a, x.abs()) and torch.equal(n, -x) and torch.allclose(e, x.exp())
               for a, n, e in got)
    print("fallbacks", eagerc.stats()["fallbacks"])
""")


@pytest.mark.slow
def test_a_really_full_inductor_cache_dir_warns_once(tmp_path):
    """TORCHINDUCTOR_CACHE_DIR on a full 64 KiB tmpfs, in a private mount namespace."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -rm (user and mount namespaces) to mount a full tmpfs")
    full = tmp_path / "full"
    full.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs '{full}' && "
              f"(dd if=/dev/zero of='{full}/fill' bs=4k count=100 2>/dev/null; true) && "
              f"exec '{sys.executable}' -c \"$CODE\"")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True,
                          timeout=600, env=_env(tmp_path / "cache", CODE=_FULL_INDUCTOR_DIR,
                                                TORCHINDUCTOR_CACHE_DIR=full / "inductor"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["fallbacks", "9"]  # every call right, uncompiled
    assert done.stderr.count("a disk the compiler writes to is full") == 1, done.stderr[-3000:]
    assert "No space left on device" in done.stderr


def test_a_read_only_cache_warns_once_for_every_miss(fresh_cache, monkeypatch, caplog):
    from kernel_cache.disk import DiskStore

    def read_only(self, key, artifact, metadata):
        raise OSError(errno.EROFS, "the kernel cache is read-only", self.directory)

    monkeypatch.setattr(DiskStore, "add", read_only)
    x = torch.randn(3, 7)
    with caplog.at_level(logging.WARNING), eagerc.enabled(
            "cpu", ops=["aten::abs", "aten::neg", "aten::exp"]):
        got = [(torch.abs(x), torch.neg(x), torch.exp(x)) for _ in range(3)]
    for a, n, e in got:
        torch.testing.assert_close((a, n, e), (x.abs(), -x, x.exp()))
    assert eagerc.stats()["compiles"] == 3  # each kept for the process: compiled once
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "read-only" in warning.getMessage() and "kept for this process only" in \
        warning.getMessage()
