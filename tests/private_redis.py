"""A private redis-server on one loopback port, for the tests of the remote tier and the Ray
farm: started in a test's own folder without persistence (a restart loses every key, as a
fleet's cache server may), stopped and started again by the tests that need that. Skips,
saying what is missing, where there is no redis package or redis-server."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


def _debug_option() -> list[str]:
    """Redis 7 refuses DEBUG (the slow-server test's SLEEP) unless enabled at start."""
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    major = version.split("v=", 1)[-1].split(".", 1)[0]
    return ["--enable-debug-command", "yes"] if major.isdigit() and int(major) >= 7 else []


class RedisServer:
    """A private redis-server on one loopback port that a test can stop and start again."""

    def __init__(self, directory):
        self.redis = pytest.importorskip("redis")
        if shutil.which("redis-server") is None:
            pytest.skip("no redis-server on PATH (apt-get install redis-server)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.directory = str(directory)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory, *_debug_option()],
            stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.client().ping()
                return self
            except (self.redis.exceptions.ConnectionError, FileNotFoundError):
                time.sleep(0.05)
        self.stop()
        pytest.skip("redis-server did not start")

    def stop(self):
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def client(self):
        return self.redis.Redis.from_url(self.url, socket_timeout=30)
