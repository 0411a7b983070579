"""TieredStore: several stores in order, fastest first (the local disk, then Redis).

    store = TieredStore([DiskStore(namespace=ns), RedisStore("redis://cache-host:6379/0",
                                                             namespace=ns)])

is what ``kernel_cache.open_store(ns)`` builds when ``EAGERC_REMOTE_CACHE`` is set.
"""
from __future__ import annotations

from kernel_cache.interface import Entry, KernelStore
from kernel_cache.namespace import Namespace  # noqa: F401  (the doctest's)
from kernel_cache.records import WarnOnce, describe_key, os_error_cause


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
        self._warn = WarnOnce()

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
                self._warn(("backfill", os_error_cause(exc)),
                           "could not copy cache entry %s into a nearer tier (%s)",
                           describe_key(key), exc)
                filled.append(entry)
        return filled

    def add(self, key: bytes, artifact: bytes, metadata: dict) -> Entry:
        """Add to every tier; the entry of the nearest that took it. A tier that cannot (a
        full or read-only disk) does not keep the others from sharing the kernel; only when
        none could is the first tier's OSError raised."""
        entry, first_error = None, None
        for depth, tier in enumerate(self.tiers):
            try:
                added = tier.add(key, artifact, metadata)
            except OSError as exc:
                first_error = first_error or exc
                if depth:  # the nearest tier's failure is the caller's to report
                    self._warn((type(tier).__name__, os_error_cause(exc)),
                               "could not store cache entry %s in %s (%s)", describe_key(key),
                               type(tier).__name__, exc)
                continue
            entry = entry or added
        if entry is None:
            raise first_error
        if first_error is not None:
            self._warn(("nearest", os_error_cause(first_error)),
                       "could not store cache entry %s in %s (%s); a farther tier holds it",
                       describe_key(key), type(self.tiers[0]).__name__, first_error)
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
