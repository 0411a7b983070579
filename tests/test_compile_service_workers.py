"""How many workers the compile service starts by default: half the cores the caller may
run on (its affinity), so a process pinned to 2 cores of a 16-core machine starts one
worker, not eight that would share those 2 cores."""
import os

from eagerc import _config


def test_the_default_worker_count_follows_the_affinity_not_the_machine(monkeypatch):
    monkeypatch.delenv(_config.COMPILE_WORKERS_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert _config.compile_workers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert _config.compile_workers() == 4
    monkeypatch.setenv(_config.COMPILE_WORKERS_ENV, "3")
    assert _config.compile_workers() == 3
