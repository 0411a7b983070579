"""A shared remote tier (Redis) and the store that chains tiers (local disk, then remote).

Machines that share a Redis server compile each kernel once between them::

    store = TieredStore([DiskStore(namespace=ns), RedisStore("redis://cache-host:6379/0",
                                                             namespace=ns)])

which is what ``kernel_cache.open_store(ns)`` builds when ``EAGERC_REMOTE_CACHE`` is set.

Redis layout, per namespace digest ``<ns>``::

    eagerc:<ns>:k:<key hex>      hash: variant id -> JSON variant record
    eagerc:<ns>:a:<sha256>       string: the artifact bytes

Artifacts fetched from Redis are written to ``<local_dir>/<ns>/remote/<sha256>.so`` (verified)
before an entry is returned, because the caller ``dlopen``s a local path.
"""
from __future__ import annotations

import json
import os
import shutil
import time

from kernel_cache.interface import Entry, KernelStore
from kernel_cache.namespace import Namespace
from kernel_cache.layout import default_directory
from kernel_cache.records import (artifact_problem, atomic_write, check_key, describe_key,
                                  file_problem, is_record, log_evicted, logger, make_record)

_MISSING_PACKAGE = ("RedisStore needs the 'redis' Python package, which is not installed. "
                    "Fix: pip install redis, or unset EAGERC_REMOTE_CACHE to use the local disk "
                    "cache alone.")


def _import_redis():
    try:
        import redis  # lazy: most users never configure a remote tier
    except ImportError as exc:
        raise ImportError(_MISSING_PACKAGE) from exc
    return redis


class RedisStore(KernelStore):
    """The kernel store of one namespace on a Redis server.

    Args:
        url: e.g. ``"redis://localhost:6379/0"``.
        namespace: a :class:`Namespace` (or its digest).
        local_dir: where fetched artifacts are written; default the disk cache directory.
        client: an already built client (tests pass a fake); then ``url`` is only a label.
        prefix: first part of every Redis key, to share one server with other programs.

    Raises ImportError when the ``redis`` package is missing and ConnectionError when the
    server does not answer; both messages say how to fix it.
    """

    def __init__(self, url: str, *, namespace: Namespace | str, local_dir: str | None = None,
                 client=None, prefix: str = "eagerc"):
        redis = _import_redis()
        self._errors = redis.exceptions.RedisError
        self.url = url
        self.digest = namespace.digest() if isinstance(namespace, Namespace) else namespace
        if client is None:
            client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10)
        try:
            client.ping()
        except self._errors as exc:
            raise ConnectionError(
                f"cannot reach the Redis cache server at {url} ({exc}). Fix: start the server "
                "(e.g. redis-server), correct the URL, or unset EAGERC_REMOTE_CACHE.") from exc
        self._redis = client
        self._prefix = f"{prefix}:{self.digest}:"
        self.local_dir = os.path.join(local_dir or default_directory(), self.digest, "remote")
        self.counters = {"hits": 0, "misses": 0, "adds": 0, "evicted": 0, "skipped": 0}
        self._down_until = 0.0  # while the server is down: skip it until then

    # A server that went away is said once, skipped, and tried again every this many seconds.
    RETRY_INTERVAL_S = 30.0

    def _guarded(self, action: str, fallback, fn):
        """A server that goes away mid-run costs rebuilds, never a crash, and one warning
        per outage: while it is down it is skipped, and tried again at intervals."""
        now = time.monotonic()
        if now < self._down_until:
            self.counters["skipped"] += 1
            return fallback
        try:
            result = fn(self._redis)
        except self._errors as exc:
            logger.warning("remote cache %s failed while %s (%s); using the local cache alone, "
                           "trying the server again in %.0f s", self.url, action, exc,
                           self.RETRY_INTERVAL_S)
            self._down_until = now + self.RETRY_INTERVAL_S
            return fallback
        if self._down_until:
            logger.warning("remote cache %s is back", self.url)
            self._down_until = 0.0
        return result

    def _index_key(self, key: bytes) -> str:
        return f"{self._prefix}k:{key.hex()}"

    def _artifact_key(self, sha256: str) -> str:
        return f"{self._prefix}a:{sha256}"

    def _local_path(self, sha256: str) -> str:
        return os.path.join(self.local_dir, sha256 + ".so")

    def get(self, key: bytes) -> list[Entry]:
        key = check_key(key)
        raw = self._guarded("reading", {}, lambda r: r.hgetall(self._index_key(key)))
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
                self._guarded("removing a bad record",
                              None, lambda r, f=field: r.hdel(self._index_key(key), f))
        entries = []
        for record in sorted(records, key=lambda r: r.get("added", 0)):
            path = self._local_path(record["sha256"])
            if file_problem(path, record) is not None and not self._materialize(key, record):
                continue
            entries.append(Entry(key, record["variant_id"], path, record["metadata"]))
        self.counters["hits" if entries else "misses"] += 1
        return entries

    def _materialize(self, key: bytes, record: dict) -> bool:
        """Fetch and verify one artifact into its local file; evict it if broken."""
        data = self._guarded("fetching", None,
                             lambda r: r.get(self._artifact_key(record["sha256"])))
        why = artifact_problem(data, record)
        if why is None:
            os.makedirs(self.local_dir, exist_ok=True)
            atomic_write(self._local_path(record["sha256"]), data)
            return True

        def evict(r):
            r.hdel(self._index_key(key), record["variant_id"])
            r.delete(self._artifact_key(record["sha256"]))  # by content: broken for all

        self._guarded("evicting", None, evict)
        self.counters["evicted"] += 1
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

        self._guarded("adding", None, upload)
        os.makedirs(self.local_dir, exist_ok=True)
        path = self._local_path(record["sha256"])
        atomic_write(path, data)
        self.counters["adds"] += 1
        return Entry(key, record["variant_id"], path, record["metadata"])

    def evict(self, key: bytes, variant_id: str) -> None:
        # The artifact stays: another key may share its bytes; clear() removes everything.
        self._guarded("evicting", None,
                      lambda r: r.hdel(self._index_key(check_key(key)), variant_id))

    def _scan(self, r, kind: str) -> list:
        return list(r.scan_iter(match=f"{self._prefix}{kind}:*", count=1000))

    def clear(self) -> None:
        def wipe(r):
            names = self._scan(r, "k") + self._scan(r, "a")
            for start in range(0, len(names), 500):
                r.delete(*names[start:start + 500])

        self._guarded("clearing", None, wipe)
        shutil.rmtree(self.local_dir, ignore_errors=True)

    def stats(self) -> dict:
        keys = self._guarded("counting", [], lambda r: self._scan(r, "k"))
        return {"url": self.url, "namespace": self.digest, "keys": len(keys), **self.counters}

    def close(self) -> None:
        self._redis.close()


class TieredStore(KernelStore):
    """Several stores in order, fastest first (e.g. ``[DiskStore, RedisStore]``).

    ``get`` asks each tier in turn and copies a hit in a later tier into the earlier ones, so
    the next process finds it locally; ``add`` writes to every tier. Entries returned come
    from the first tier that holds them after back-filling (a local file).

        >>> import tempfile
        >>> ns = Namespace(1, "2.13", "0.1", "cpu", "0")
        >>> from kernel_cache.disk import DiskStore
        >>> near, far = DiskStore(tempfile.mkdtemp(), namespace=ns), DiskStore(
        ...     tempfile.mkdtemp(), namespace=ns)
        >>> _ = far.add(b"k", b"code", {})
        >>> [e.artifact_path.startswith(near.directory) for e in TieredStore([near, far]).get(b"k")]
        [True]
        >>> len(near.get(b"k"))
        1
    """

    def __init__(self, tiers: list[KernelStore]):
        if not tiers:
            raise ValueError("TieredStore needs at least one tier")
        self.tiers = list(tiers)

    def get(self, key: bytes) -> list[Entry]:
        for depth, tier in enumerate(self.tiers):
            entries = tier.get(key)
            if entries:
                return self._backfill(key, entries, self.tiers[:depth]) if depth else entries
        return []

    def _backfill(self, key: bytes, entries: list[Entry], earlier: list[KernelStore]):
        filled = []
        for entry in entries:
            try:
                with open(entry.artifact_path, "rb") as f:
                    data = f.read()
                copies = [tier.add(key, data, entry.metadata) for tier in earlier]
                filled.append(copies[0])
            except OSError as exc:  # e.g. local disk full: the remote entry still works
                logger.warning("could not copy cache entry %s into a nearer tier (%s)",
                               describe_key(key), exc)
                filled.append(entry)
        return filled

    def add(self, key: bytes, artifact: bytes, metadata: dict) -> Entry:
        entry = self.tiers[0].add(key, artifact, metadata)
        for tier in self.tiers[1:]:
            try:
                tier.add(key, artifact, metadata)
            except OSError as exc:
                logger.warning("could not store cache entry %s in %s (%s)", describe_key(key),
                               type(tier).__name__, exc)
        return entry

    def evict(self, key: bytes, variant_id: str) -> None:
        for tier in self.tiers:
            tier.evict(key, variant_id)

    def clear(self) -> None:
        for tier in self.tiers:
            tier.clear()

    def stats(self) -> dict:
        return {"tiers": [tier.stats() for tier in self.tiers]}

    def close(self) -> None:
        for tier in self.tiers:
            tier.close()
