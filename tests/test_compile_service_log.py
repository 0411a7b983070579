"""The compile service's log stays bounded (eagerc/compile_service/spool.py, cap_log): past
its cap, its newest lines move to service.log.1 and it goes on empty, however long the
service lives, while the service and its workers keep writing through the descriptors they
inherited."""
from __future__ import annotations

import os
import subprocess
import sys

from eagerc.compile_service import client, spool


def _line(n: int) -> bytes:
    return f"job {n:06d}: ok\n".encode()


def _numbers(data: bytes) -> list:
    return [int(line.split()[1][:-1]) for line in data.splitlines()]


def test_the_log_stays_under_its_cap_and_keeps_its_newest_lines(tmp_path):
    cap, batch = 1000, 30  # bytes; lines written between two of the service's looks
    log_path, previous = tmp_path / spool.LOG, tmp_path / (spool.LOG + ".1")
    written, moved = 0, 0
    # One descriptor opened for append, as the service's and its workers' stdout are.
    with open(log_path, "ab", buffering=0) as out:
        for _ in range(200):  # ~100 KB in all: 100 times the cap
            for _ in range(batch):
                out.write(_line(written))
                written += 1
            moved += spool.cap_log(str(tmp_path), cap)
            log_size = log_path.stat().st_size
            assert log_size <= cap + batch * len(_line(0)), log_size
            if previous.exists():
                assert previous.stat().st_size <= cap
            # Writes after the truncation land at the file's start (no hole before them).
            assert log_size == len(log_path.read_bytes().replace(b"\0", b""))
    assert moved > 50
    # The newest lines are kept, whole and in order, up to the last one written.
    kept = _numbers(previous.read_bytes() + log_path.read_bytes())
    assert kept == list(range(written - len(kept), written))
    assert len(kept) * len(_line(0)) >= cap


def test_a_log_past_its_cap_keeps_whole_lines_only(tmp_path):
    log_path = tmp_path / spool.LOG
    log_path.write_bytes(b"".join(_line(n) for n in range(1000)))
    assert spool.cap_log(str(tmp_path), 1000)
    assert log_path.read_bytes() == b""
    kept = (tmp_path / (spool.LOG + ".1")).read_bytes()
    assert len(kept) <= 1000 and kept.endswith(_line(999))
    assert _numbers(kept) == list(range(1000 - len(kept) // len(_line(0)), 1000))
    assert not spool.cap_log(str(tmp_path), 1000)  # under its cap: left as it is


def test_the_service_caps_the_log_it_writes_to(tmp_path):
    # The service process as the client starts it (stdout and stderr appended to the log),
    # with a log an earlier service left past the cap; nothing queued, no idle time.
    log_path = tmp_path / spool.LOG
    old = b"".join(_line(n) for n in range(spool.LOG_MAX_BYTES // len(_line(0)) + 100))
    log_path.write_bytes(old)
    with open(log_path, "ab") as out:
        subprocess.run([sys.executable, client._DAEMON, str(tmp_path), "1", "0"],
                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=60, check=True)
    assert log_path.read_bytes().startswith(b"eagerc compile service ")
    assert log_path.stat().st_size < 1000
    kept = (tmp_path / (spool.LOG + ".1")).read_bytes()
    assert len(kept) <= spool.LOG_MAX_BYTES and old.endswith(kept) and kept.startswith(b"job ")
