"""RedisStore: a remote tier shared by every machine that points at one Redis server.

Machines that share a Redis server compile each kernel once between them; see
``kernel_cache.tiered`` for the local-then-remote chain ``open_store`` builds.

Redis layout, per namespace digest ``<ns>``::

    eagerc:<ns>:k:<key hex>      hash: variant id -> JSON variant record
    eagerc:<ns>:a:<sha256>       string: the artifact bytes
    eagerc:<ns>:stats            hash: hits, misses, adds, bytes_read, bytes_written, errors,
                                 evicted, summed over every process (``stats --remote``)
    eagerc:<ns>:namespace        string: the Namespace fields as JSON

Artifacts fetched from Redis are written to ``<local_dir>/<ns>/remote/<sha256>.so`` (verified
against the record's sha256) before an entry is returned, because the caller ``dlopen``s a
local path.

A slow or absent server never holds a call up for long: each ``get`` or ``add`` gives the
server at most ``EAGERC_REMOTE_TIMEOUT`` seconds in all (default 1), after which the call goes
on with the local cache alone. A server that failed or timed out is skipped, then tried again
after 1 s, 2 s, 4 s, ... up to 30 s; the outage and the return are logged once each.

    >>> RedisStore.RETRY_MIN_S, RedisStore.RETRY_MAX_S  # the backoff's first and longest wait
    (1.0, 30.0)
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import threading
import time

from kernel_cache.interface import Entry, KernelStore
from kernel_cache.layout import default_directory
from kernel_cache.namespace import Namespace
from kernel_cache.records import (WarnOnce, artifact_problem, atomic_write, check_key,
                                  describe_key, file_problem, is_record, log_evicted, logger,
                                  make_record)

ENV_TIMEOUT = "EAGERC_REMOTE_TIMEOUT"
DEFAULT_TIMEOUT_S = 1.0
# Maintenance (clear, stats over every key) may scan a large keyspace; it is not on a call.
MAINTENANCE_TIMEOUT_S = 60.0

_MISSING_PACKAGE = ("RedisStore needs the 'redis' Python package, which is not installed. "
                    "Fix: pip install redis, or unset EAGERC_REMOTE_CACHE to use the local disk "
                    "cache alone.")


def _import_redis():
    try:
        import redis  # lazy: most users never configure a remote tier
    except ImportError as exc:
        raise ImportError(_MISSING_PACKAGE) from exc
    return redis


def remote_timeout() -> float:
    """``$EAGERC_REMOTE_TIMEOUT`` in seconds (default 1): the most one cache call waits on
    the server; read on every call."""
    text = os.environ.get(ENV_TIMEOUT, "").strip()
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not value > 0:
        logger.warning("%s=%r is not a positive number of seconds; using %s", ENV_TIMEOUT, text,
                       DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S
    return value


def connect(url: str, timeout: float):
    """A redis client whose every socket operation gives up after ``timeout`` seconds, with
    no retries of its own (this module decides when to try again)."""
    redis = _import_redis()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout,
                                retry=Retry(NoBackoff(), 0))


class _Outage(Exception):
    """The server is being skipped (down, or this call's time is spent)."""


class RedisStore(KernelStore):
    """The kernel store of one namespace on a Redis server.

    Args:
        url: e.g. ``"redis://localhost:6379/0"``.
        namespace: a :class:`Namespace` (or its digest).
        local_dir: where fetched artifacts are written; default the disk cache directory.
        client: an already built client (tests pass a fake); then ``url`` is only a label.
        prefix: first part of every Redis key, to share one server with other programs.
        timeout: seconds one call may wait on the server; default :func:`remote_timeout`.
        require_server: raise ConnectionError when the server does not answer now (the
            default); False starts with it marked down, to be tried again with backoff.

    Raises ImportError when the ``redis`` package is missing and ConnectionError when the
    server does not answer (``require_server``); both messages say how to fix it.
    """

    RETRY_MIN_S = 1.0   # the first retry after a failure; doubled per failed retry
    RETRY_MAX_S = 30.0

    def __init__(self, url: str, *, namespace: Namespace | str, local_dir: str | None = None,
                 client=None, prefix: str = "eagerc", timeout: float | None = None,
                 require_server: bool = True):
        redis = _import_redis()
        self._errors = (redis.exceptions.RedisError,)
        self._connection_errors = (redis.exceptions.ConnectionError,
                                   redis.exceptions.TimeoutError)
        self._socket_timeout = redis.exceptions.TimeoutError
        self.url = url
        self.timeout = timeout or remote_timeout()
        self.digest = namespace.digest() if isinstance(namespace, Namespace) else namespace
        self._fields = namespace.to_dict() if isinstance(namespace, Namespace) else None
        self._redis = client if client is not None else connect(url, self.timeout)
        self._prefix = f"{prefix}:{self.digest}:"
        self.local_dir = os.path.join(local_dir or default_directory(), self.digest, "remote")
        self.counters = {"hits": 0, "misses": 0, "adds": 0, "evicted": 0, "skipped": 0,
                         "errors": 0, "bytes_read": 0, "bytes_written": 0}
        self._pending: dict[str, int] = {}  # counter increments not yet sent to the server
        self._lock = threading.Lock()
        self._down_until = 0.0  # while the server is down: skip it until then
        self._backoff = self.RETRY_MIN_S
        self._warn = WarnOnce()
        self._pool = None
        self._pool_pid = None
        if not require_server:
            self._guarded("connecting", None, lambda r: r.ping(), self._deadline())
            return
        try:
            self._redis.ping()  # bounded by the client's socket timeouts
        except self._errors as exc:
            raise ConnectionError(
                f"cannot reach the Redis cache server at {url} ({exc}). Fix: start the "
                "server (e.g. redis-server), correct the URL, or unset "
                "EAGERC_REMOTE_CACHE.") from exc

    # -- bounded calls ---------------------------------------------------------------------

    def _deadline(self, seconds: float | None = None) -> float:
        return time.monotonic() + (seconds or self.timeout)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        # Threads do not survive fork: a child (a warm_cache worker) starts its own pool.
        if self._pool is None or self._pool_pid != os.getpid():
            self._pool = concurrent.futures.ThreadPoolExecutor(
                4, thread_name_prefix="kernel-cache-redis")
            self._pool_pid = os.getpid()
        return self._pool

    def _call(self, action: str, fn, deadline: float):
        """``fn(client)``, waited for until ``deadline`` at most. A server that is down is
        skipped; one that fails or does not answer in time is marked down (said once per
        outage) and retried with backoff. Raises RedisError or _Outage; see _guarded."""
        now = time.monotonic()
        if now < self._down_until:
            self.counters["skipped"] += 1
            raise _Outage("skipped: the server is marked down")
        if now >= deadline:
            self.counters["skipped"] += 1
            raise _Outage("skipped: this call's time on the server is spent")
        future = self._executor().submit(fn, self._redis)
        try:
            result = future.result(timeout=deadline - now)
        except (concurrent.futures.TimeoutError, self._socket_timeout):
            # Whichever fires first: this call's deadline, or the socket's equal timeout.
            self._failed(action, f"no answer within {self.timeout:g} s "
                                 f"({ENV_TIMEOUT}={self.timeout:g})", down=True)
            raise _Outage(f"no answer within {self.timeout:g} s") from None
        except self._connection_errors as exc:
            self._failed(action, str(exc) or type(exc).__name__, down=True)
            raise
        except self._errors as exc:  # the server answered with an error (OOM, READONLY)
            self._failed(action, str(exc), down=False)
            raise
        if self._down_until:
            logger.warning("remote cache %s is back", self.url)
            with self._lock:
                self._down_until, self._backoff = 0.0, self.RETRY_MIN_S
        return result

    def _failed(self, action: str, why: str, down: bool) -> None:
        self.counters["errors"] += 1
        self._count("errors")
        if not down:
            # Said once per kind: "OOM command not allowed when used memory > 'maxmemory'".
            self._warn(("reply", why.split(" ", 1)[0]), "remote cache %s answered an error "
                       "while %s (%s); going on without it (kernels are kept locally)",
                       self.url, action, why)
            return
        with self._lock:
            first = not self._down_until
            wait = self._backoff
            self._down_until = time.monotonic() + wait
            self._backoff = min(wait * 2, self.RETRY_MAX_S)
        if first:
            logger.warning("remote cache %s failed while %s (%s); using the local cache alone, "
                           "trying the server again in %.0f s", self.url, action, why, wait)
        else:
            logger.debug("remote cache %s still failing while %s (%s); next try in %.0f s",
                         self.url, action, why, wait)

    def _guarded(self, action: str, fallback, fn, deadline: float):
        """Like _call; any failure yields ``fallback`` (costs rebuilds, never a crash)."""
        try:
            return self._call(action, fn, deadline)
        except self._errors + (_Outage,):
            return fallback

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._pending[name] = self._pending.get(name, 0) + amount

    def _flush_counters(self) -> None:
        """Send counter increments to the server, without waiting (kept for later if down)."""
        if time.monotonic() < self._down_until:
            return
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return

        def send(r):
            pipe = r.pipeline(transaction=False)
            for name, amount in pending.items():
                pipe.hincrby(f"{self._prefix}stats", name, amount)
            if self._fields is not None:
                pipe.set(f"{self._prefix}namespace", json.dumps(self._fields, sort_keys=True))
            pipe.execute()

        def done(future):
            if future.exception() is not None:
                for name, amount in pending.items():
                    self._count(name, amount)

        self._executor().submit(send, self._redis).add_done_callback(done)

    # -- KernelStore -----------------------------------------------------------------------

    def _index_key(self, key: bytes) -> str:
        return f"{self._prefix}k:{key.hex()}"

    def _artifact_key(self, sha256: str) -> str:
        return f"{self._prefix}a:{sha256}"

    def _local_path(self, sha256: str) -> str:
        return os.path.join(self.local_dir, sha256 + ".so")

    def get(self, key: bytes) -> list[Entry]:
        key = check_key(key)
        deadline = self._deadline()
        raw = self._guarded("reading", None, lambda r: r.hgetall(self._index_key(key)), deadline)
        if raw is None:  # not asked: neither a hit nor a miss of the server
            return []
        records = []
        for field, value in raw.items():
            try:
                record = json.loads(value)
            except ValueError:
                record = None
            if is_record(record):
                records.append(record)
            else:  # garbage (another program, a bad write): say so, and remove it
                logger.warning("remote cache %s: unreadable record %r under %s; removed",
                               self.url, field, describe_key(key))
                self._guarded("removing a bad record", None,
                              lambda r, f=field: r.hdel(self._index_key(key), f), deadline)
        entries = []
        for record in sorted(records, key=lambda r: r.get("added", 0)):
            path = self._local_path(record["sha256"])
            if file_problem(path, record) is not None \
                    and not self._materialize(key, record, deadline):
                continue
            entries.append(Entry(key, record["variant_id"], path, record["metadata"]))
        outcome = "hits" if entries else "misses"
        self.counters[outcome] += 1
        self._count(outcome)
        self._flush_counters()
        return entries

    def _materialize(self, key: bytes, record: dict, deadline: float) -> bool:
        """Fetch and verify one artifact into its local file; evict it if broken."""
        try:
            data = self._call("fetching", lambda r: r.get(self._artifact_key(record["sha256"])),
                              deadline)
        except self._errors + (_Outage,):
            return False  # unknown, not broken: the record stays
        why = artifact_problem(data, record)
        if why is None:
            os.makedirs(self.local_dir, exist_ok=True)
            atomic_write(self._local_path(record["sha256"]), data)
            self.counters["bytes_read"] += len(data)
            self._count("bytes_read", len(data))
            return True

        def evict(r):
            r.hdel(self._index_key(key), record["variant_id"])
            r.delete(self._artifact_key(record["sha256"]))  # by content: broken for all

        self._guarded("evicting", None, evict, deadline)
        self.counters["evicted"] += 1
        self._count("evicted")
        if data is None:
            # Under maxmemory the server drops artifacts (allkeys-* policies), or it restarted
            # without its data: expected churn, said once.
            self._warn("artifact missing", "remote cache %s lost artifacts (evicted under "
                       "maxmemory, or the server restarted); their records are removed and "
                       "the kernels are compiled again (first: %s)", self.url, describe_key(key))
        else:
            log_evicted(key, record["variant_id"], why)
        return False

    def add(self, key: bytes, artifact: bytes, metadata: dict) -> Entry:
        key = check_key(key)
        record = make_record(artifact, metadata)
        data = bytes(artifact)

        def upload(r):
            pipe = r.pipeline(transaction=True)
            # SET, not SETNX: a corrupted copy left on the server gets repaired.
            pipe.set(self._artifact_key(record["sha256"]), data)
            # HSETNX appends atomically, so concurrent adds from many machines all survive.
            pipe.hsetnx(self._index_key(key), record["variant_id"],
                        json.dumps(dict(record, added=time.time())))
            pipe.execute()
            return True

        if self._guarded("adding", False, upload, self._deadline()):
            self.counters["bytes_written"] += len(data)
            self._count("bytes_written", len(data))
            self._count("adds")
        os.makedirs(self.local_dir, exist_ok=True)
        path = self._local_path(record["sha256"])
        atomic_write(path, data)
        self.counters["adds"] += 1
        self._flush_counters()
        return Entry(key, record["variant_id"], path, record["metadata"])

    def evict(self, key: bytes, variant_id: str) -> None:
        # The artifact stays: another key may share its bytes; clear() removes everything.
        self._guarded("evicting", None,
                      lambda r: r.hdel(self._index_key(check_key(key)), variant_id),
                      self._deadline())

    def _scan(self, r, kind: str) -> list:
        return list(r.scan_iter(match=f"{self._prefix}{kind}:*", count=1000))

    def clear(self) -> None:
        def wipe(r):
            names = self._scan(r, "k") + self._scan(r, "a") + [f"{self._prefix}stats"]
            for start in range(0, len(names), 500):
                r.delete(*names[start:start + 500])

        self._guarded("clearing", None, wipe, self._deadline(MAINTENANCE_TIMEOUT_S))
        shutil.rmtree(self.local_dir, ignore_errors=True)

    def stats(self) -> dict:
        keys = self._guarded("counting", [], lambda r: self._scan(r, "k"),
                             self._deadline(MAINTENANCE_TIMEOUT_S))
        return {"url": self.url, "namespace": self.digest, "keys": len(keys), **self.counters}

    def close(self) -> None:
        """Send the last counters (waiting at most the socket timeout) and disconnect."""
        if self._pool is not None and self._pool_pid == os.getpid():
            self._flush_counters()
            self._pool.shutdown(wait=True)
            self._pool = None
        self._redis.close()
