"""The shared Redis tier: a restart, a server down at start, a slow server, eviction under
maxmemory, broken artifacts, and counters over every host (``stats --remote``).

Every test that needs a server starts a private redis-server on a free loopback port (and
skips, saying so, where there is no redis-server or redis package).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from private_redis import RedisServer

from kernel_cache import DiskStore, Entry, Namespace, RedisStore, TieredStore, open_store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGGER = "eagerc.kernel_cache"
NS = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
               target_arch="cpu-avx512", compiler_settings="3f2a9c01")
KEY = b"aten::add.Tensor|f32,f32|rank2|contiguous"
ARTIFACT = bytes(range(256)) * 400  # 100 KiB, the size of a typical per-op kernel


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    # No test may touch the user's real cache or a configured remote server.
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("EAGERC_REMOTE_CACHE", raising=False)
    monkeypatch.delenv("EAGERC_REMOTE_TIMEOUT", raising=False)


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server):
    return redis_server.url


def test_redis_missing_package_says_how_to_fix(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "redis", None)  # makes `import redis` fail
    with pytest.raises(ImportError, match=r"needs the 'redis' Python package.*pip install redis"):
        RedisStore("redis://localhost:6379/0", namespace=NS)
    monkeypatch.setenv("EAGERC_REMOTE_CACHE", "redis://localhost:6379/0")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert isinstance(open_store(NS), DiskStore)  # the local cache still works
    assert "pip install redis" in caplog.text


def test_redis_unreachable_server_says_how_to_fix(tmp_path):
    pytest.importorskip("redis")
    with pytest.raises(ConnectionError, match="cannot reach the Redis cache server.*redis-server"):
        RedisStore(f"unix://{tmp_path}/no-server.sock", namespace=NS)


def test_redis_same_key_different_key(redis_url, tmp_path):
    writer = RedisStore(redis_url, namespace=NS, local_dir=str(tmp_path / "w"))
    reader = RedisStore(redis_url, namespace=NS, local_dir=str(tmp_path / "r"))
    entry = writer.add(KEY, ARTIFACT, {"g": 1})
    [hit] = reader.get(KEY)
    assert (hit.variant_id, hit.metadata) == (entry.variant_id, {"g": 1})
    assert hit.artifact_path.startswith(str(tmp_path / "r"))
    assert read(hit.artifact_path) == ARTIFACT
    assert reader.get(KEY + b"x") == []
    other_ns = dataclasses.replace(NS, target_arch="cuda-sm90")
    assert RedisStore(redis_url, namespace=other_ns, local_dir=str(tmp_path)).get(KEY) == []
    reader.clear()
    assert writer.get(KEY) == []


def test_redis_broken_artifact_is_evicted(redis_url, tmp_path, caplog):
    import redis
    store = RedisStore(redis_url, namespace=NS, local_dir=str(tmp_path / "local"))
    entry = store.add(KEY, ARTIFACT, {})
    os.unlink(entry.artifact_path)  # force a fetch from the server
    blob = f"eagerc:{NS.digest()}:a:{hashlib.sha256(ARTIFACT).hexdigest()}"
    redis.Redis.from_url(redis_url).set(blob, b"garbage")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert store.get(KEY) == []
    assert len(caplog.records) == 1 and "truncated" in caplog.text
    assert store.add(KEY, ARTIFACT, {}) == entry
    os.unlink(entry.artifact_path)
    assert store.get(KEY) == [entry] and read(entry.artifact_path) == ARTIFACT


def test_open_store_adds_redis_tier(redis_url, tmp_path, monkeypatch):
    monkeypatch.setenv("EAGERC_REMOTE_CACHE", redis_url)
    machine_a = open_store(NS, directory=str(tmp_path / "a"))
    assert isinstance(machine_a, TieredStore)
    entry = machine_a.add(KEY, ARTIFACT, {})
    machine_b = open_store(NS, directory=str(tmp_path / "b"))  # empty disk, same server
    [hit] = machine_b.get(KEY)
    assert hit == Entry(KEY, entry.variant_id, hit.artifact_path, {})
    assert hit.artifact_path.startswith(str(tmp_path / "b" / NS.digest() / "artifacts"))
    assert DiskStore(str(tmp_path / "b"), namespace=NS).get(KEY) == [hit]  # back-filled


def test_redis_garbage_record_is_removed_with_a_warning(redis_url, tmp_path, caplog):
    import redis

    store = RedisStore(redis_url, namespace=NS, local_dir=str(tmp_path))
    entry = store.add(KEY, ARTIFACT, {})
    client = redis.Redis.from_url(redis_url)
    index_key = f"eagerc:{NS.digest()}:k:{KEY.hex()}"
    client.hset(index_key, "junk", b"not json {")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert store.get(KEY) == [entry]
    assert "unreadable record b'junk'" in caplog.text and KEY.decode() in caplog.text
    assert client.hkeys(index_key) == [entry.variant_id.encode()]  # the garbage is gone


class _FlakyRedis:
    """A client whose server can go away and come back."""

    def __init__(self):
        import redis

        self.up, self.calls, self._error = True, 0, redis.exceptions.ConnectionError

    def ping(self):
        return True

    def hgetall(self, key):
        self.calls += 1
        if not self.up:
            raise self._error("Connection refused")
        return {}


def test_redis_outage_is_said_once_and_retried_at_intervals(tmp_path, caplog, monkeypatch):
    pytest.importorskip("redis")
    client = _FlakyRedis()
    store = RedisStore("redis://flaky", namespace=NS, local_dir=str(tmp_path), client=client)
    client.up = False
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(50):
            assert store.get(KEY) == []
    assert caplog.text.count("failed while reading") == 1 and client.calls == 1
    assert store.counters["skipped"] == 49
    monkeypatch.setattr(store, "_down_until", 0.5)  # the retry interval has passed
    client.up = True
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        store.get(KEY)
    assert client.calls == 2 and "is back" in caplog.text


_SHARE_CHILD = """
import torch, eagerc
x = torch.randn(16, 16)
with eagerc.enabled("cpu", ops=["aten::abs"]):
    y = torch.abs(x)
assert torch.equal(y, x.abs())
s = eagerc.stats()
print(s["compiles"], s["disk_loads"])
"""


def _share_child(url, cache_dir):
    env = dict(os.environ, EAGERC_CACHE_DIR=str(cache_dir), EAGERC_REMOTE_CACHE=url)
    result = subprocess.run([sys.executable, "-c", _SHARE_CHILD], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [int(v) for v in result.stdout.split()[-2:]], result.stderr


@pytest.mark.slow
def test_two_processes_with_separate_disks_share_kernels_through_redis(redis_url, tmp_path):
    (compiles_a, _), _ = _share_child(redis_url, tmp_path / "disk_a")
    (compiles_b, loads_b), _ = _share_child(redis_url, tmp_path / "disk_b")
    assert compiles_a == 1
    assert compiles_b == 0 and loads_b == 1   # from the shared tier, onto disk_b


@pytest.mark.slow
def test_a_stopped_redis_server_does_not_break_compiles(tmp_path):
    pytest.importorskip("redis")
    # Nothing listens on this socket: every remote call fails; compiles go on, correct.
    url = f"unix://{tmp_path / 'gone.sock'}"
    (compiles, _), stderr = _share_child(url, tmp_path / "disk")
    assert compiles == 1
    (compiles, loads), _ = _share_child(url, tmp_path / "disk")
    assert compiles == 0 and loads == 1   # the local disk tier still serves


# -- a server that goes away, comes back, or was never there ---------------------------------

def _fast_retry(monkeypatch):
    """Retries after 0.2 s instead of 1 s (doubling up to 0.8 s), to keep the tests short."""
    monkeypatch.setattr(RedisStore, "RETRY_MIN_S", 0.2)
    monkeypatch.setattr(RedisStore, "RETRY_MAX_S", 0.8)


def _until(condition, seconds=20.0):
    """Call condition() until it is true (each call is one cache call)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_restarted_server_is_used_again(redis_server, tmp_path, monkeypatch, caplog):
    _fast_retry(monkeypatch)
    store = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "a"))
    other_host = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "b"))
    store.add(KEY, ARTIFACT, {})
    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(20):
            assert other_host.get(KEY) == []  # down: a miss, no exception, no wait
        redis_server.start()  # empty: this server keeps nothing across a restart
        assert _until(lambda: other_host.add(KEY, ARTIFACT, {}) is not None
                      and redis_server.client().exists(f"eagerc:{NS.digest()}:k:{KEY.hex()}"))
    assert caplog.text.count("failed while") == 1, caplog.text  # one warning per outage
    assert caplog.text.count("is back") == 1
    os.unlink(store.get(KEY)[0].artifact_path)  # the first host fetches the re-added kernel
    [entry] = store.get(KEY)
    assert read(entry.artifact_path) == ARTIFACT


def test_a_server_down_at_start_is_used_once_it_is_up(redis_server, tmp_path, monkeypatch,
                                                      caplog):
    _fast_retry(monkeypatch)
    redis_server.stop()
    monkeypatch.setenv("EAGERC_REMOTE_CACHE", redis_server.url)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        host_a = open_store(NS, directory=str(tmp_path / "a"))
    assert isinstance(host_a, TieredStore)  # kept, to be tried again
    assert caplog.text.count("failed while connecting") == 1
    host_a.add(KEY, ARTIFACT, {})  # local only: the server is down
    redis_server.start()
    assert _until(lambda: host_a.add(b"later", b"code", {}) is not None and
                  redis_server.client().exists(f"eagerc:{NS.digest()}:k:{b'later'.hex()}"))
    host_b = open_store(NS, directory=str(tmp_path / "b"))  # another machine, empty disk
    [hit] = host_b.get(b"later")
    assert read(hit.artifact_path) == b"code"


def test_a_slow_server_never_holds_a_call_past_the_timeout(redis_server, tmp_path, monkeypatch,
                                                           caplog):
    # The first retry comes after the server wakes, so the count of timeouts is exact.
    monkeypatch.setattr(RedisStore, "RETRY_MIN_S", 10.0)
    monkeypatch.setenv("EAGERC_REMOTE_TIMEOUT", "0.5")
    store = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "a"))
    assert store.timeout == 0.5
    store.add(KEY, ARTIFACT, {})
    os.unlink(store.get(KEY)[0].artifact_path)  # the next get must ask the server
    # The server stops answering for 8 s, as a swapping or overloaded Redis does.
    sleeper = threading.Thread(target=lambda: redis_server.client().execute_command(
        "DEBUG", "SLEEP", 8))
    sleeper.start()
    time.sleep(0.3)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            began = time.monotonic()
            for _ in range(9):
                assert store.get(KEY) == []
            store.add(b"another", b"code", {})
            took = time.monotonic() - began
    finally:
        sleeper.join()
    # Ten calls on a server that answers nothing for 8 s: one times out, the rest skip it.
    assert took < 4.0, took
    assert store.counters["errors"] == 1 and store.counters["skipped"] == 9
    assert "no answer within 0.5 s (EAGERC_REMOTE_TIMEOUT=0.5)" in caplog.text
    assert _until(lambda: len(store.get(KEY)) == 1, 30)  # awake again: served, verified
    assert read(store.get(KEY)[0].artifact_path) == ARTIFACT


def test_a_stalled_connection_is_bounded_too(tmp_path, monkeypatch):
    pytest.importorskip("redis")
    # A socket that accepts and never answers (a half-dead proxy or load balancer).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    url = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    try:
        began = time.monotonic()
        store = RedisStore(url, namespace=NS, local_dir=str(tmp_path), timeout=0.5,
                           require_server=False)
        assert store.get(KEY) == [] and store.add(KEY, b"code", {}).artifact_path
        assert time.monotonic() - began < 3.0
        assert store.counters["errors"] == 1
    finally:
        listener.close()


def test_remote_timeout_setting(monkeypatch, caplog):
    from kernel_cache.remote import remote_timeout

    assert remote_timeout() == 1.0
    monkeypatch.setenv("EAGERC_REMOTE_TIMEOUT", "0.25")
    assert remote_timeout() == 0.25
    monkeypatch.setenv("EAGERC_REMOTE_TIMEOUT", "never")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert remote_timeout() == 1.0
    assert "EAGERC_REMOTE_TIMEOUT='never' is not a positive number" in caplog.text


# -- eviction under maxmemory: never a broken artifact ----------------------------------------

def _artifact(i):
    return hashlib.sha256(str(i).encode()).digest() * 3200  # 100 KiB, distinct per i


def test_eviction_under_maxmemory_gives_misses_never_broken_kernels(redis_server, tmp_path,
                                                                    caplog):
    client = redis_server.client()
    client.config_set("maxmemory-policy", "allkeys-lru")
    client.config_set("maxmemory", 3 * 1024 * 1024)  # room for about 20 of the 60 artifacts
    writer = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "w"))
    for i in range(60):
        writer.add(b"k%d" % i, _artifact(i), {"i": i})
    assert int(client.info("stats")["evicted_keys"]) > 0
    reader = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "r"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        served = {i: reader.get(b"k%d" % i) for i in range(60)}
    hits = [i for i, entries in served.items() if entries]
    assert 0 < len(hits) < 60
    for i in hits:  # whatever is served is the exact artifact
        [entry] = served[i]
        assert read(entry.artifact_path) == _artifact(i) and entry.metadata == {"i": i}
    assert caplog.text.count("lost artifacts") <= 1  # expected churn: said once at most
    assert "broken cache entry" not in caplog.text


def test_a_full_server_refuses_adds_once_and_keeps_serving(redis_server, tmp_path, caplog):
    client = redis_server.client()
    store = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path))
    first = store.add(KEY, ARTIFACT, {})
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + 64 * 1024)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(10):
            entry = store.add(b"k%d" % i, _artifact(i), {})
            assert read(entry.artifact_path) == _artifact(i)  # kept locally
    assert caplog.text.count("answered an error while adding") == 1, caplog.text
    assert "maxmemory" in caplog.text
    os.unlink(first.artifact_path)
    assert [e.variant_id for e in store.get(KEY)] == [first.variant_id]  # reads still work


# -- counters over every host: stats --remote ------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kernel_cache", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))


def test_stats_remote_sums_every_host(redis_server, tmp_path):
    host_a = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "a"))
    host_b = RedisStore(redis_server.url, namespace=NS, local_dir=str(tmp_path / "b"))
    host_a.add(KEY, ARTIFACT, {})
    host_a.add(b"small", b"code", {})
    assert len(host_b.get(KEY)) == 1 and host_b.get(b"absent") == []
    assert host_b.get(b"small") and host_a.get(b"absent") == []
    host_a.close()
    host_b.close()
    done = _cli("stats", "--remote", redis_server.url, "--json")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    ns = stats["namespaces"][NS.digest()]
    assert (ns["hits"], ns["misses"], ns["adds"], ns["errors"]) == (2, 2, 2, 0)
    assert ns["bytes_written"] == len(ARTIFACT) + 4 and ns["bytes_read"] == len(ARTIFACT) + 4
    assert (ns["keys"], ns["artifacts"], ns["artifact_bytes"]) == (2, 2, len(ARTIFACT) + 4)
    assert ns["fields"]["target_arch"] == "cpu-avx512"
    assert stats["server"]["maxmemory_policy"] == "noeviction"
    table = _cli("stats", "--remote", redis_server.url).stdout  # and for people
    assert NS.digest() in table and "hit rate" in table and "50%" in table


def test_stats_remote_errors_are_one_line(tmp_path, monkeypatch):
    pytest.importorskip("redis")
    monkeypatch.delenv("EAGERC_REMOTE_CACHE", raising=False)
    done = _cli("stats", "--remote")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no Redis URL" in done.stderr and "Traceback" not in done.stderr
    done = _cli("stats", "--remote", f"unix://{tmp_path}/none.sock")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "cannot read the Redis cache server" in done.stderr
