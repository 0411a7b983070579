"""DiskStore: the local, persistent tier, a diskcache index plus one file per artifact.

The folders are described in ``kernel_cache.layout``. Artifacts live in plain files rather than
in diskcache values because the caller ``dlopen``s them by path. Naming them by content hash
means a path never changes content: a rewrite puts back identical bytes, and a process that
mapped the old inode keeps it.

    >>> import tempfile
    >>> store = DiskStore(tempfile.mkdtemp(), namespace=Namespace(1, "2.13", "0.1", "cpu", "0"))
    >>> store.get(b"aten::neg|f32")
    []
    >>> entry = store.add(b"aten::neg|f32", b"\\x7fELF...", {"guards": []})
    >>> open(entry.artifact_path, "rb").read()
    b'\\x7fELF...'
"""
from __future__ import annotations

import errno
import importlib
import json
import os
import shutil
import time

from kernel_cache.interface import Entry, KernelStore
from kernel_cache.layout import (ARTIFACT_SUFFIX, DIGEST_NAME, default_directory,
                                 namespace_problem)
from kernel_cache.namespace import Namespace
from kernel_cache.records import (WarnOnce, atomic_write, check_key, describe_key, file_mode,
                                  file_problem, is_record, log_evicted, logger, make_record,
                                  os_error_cause)

class _ImportedWhenUsed:
    """A module imported at its first attribute read, then in this module's globals itself.

    diskcache and sqlite3 (5-10 ms to import on a busy machine) serve the index, which a
    fresh cache does not have before its first add: a process whose lookups all find no
    index (a first run, its kernels compiled elsewhere) never imports them."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        module = importlib.import_module(self._name)
        globals()[self._name] = module
        return getattr(module, attribute)


sqlite3 = _ImportedWhenUsed("sqlite3")
diskcache = _ImportedWhenUsed("diskcache")

_INDEX_SETTINGS = {
    # diskcache culls by size by default; losing an index record silently would orphan its
    # artifact and force a rebuild, so the index never evicts on its own.
    "eviction_policy": "none",
    # Keep every record inside sqlite, so one transaction covers it (no side files).
    "disk_min_file_size": 1 << 24,
}


def _writable(path: str) -> bool:
    """Whether this process may create files at `path` (its nearest existing folder)."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return os.access(path, os.W_OK)


def _follow_umask(folder: str) -> None:
    """sqlite and diskcache create the index 0644 in a 0755 folder whatever the umask; give
    them the umask's modes (a group sharing one cache with umask 002 can then write it)."""
    mode = file_mode()
    for name in ("", "cache.db", "cache.db-wal", "cache.db-shm"):
        path = os.path.join(folder, name)
        try:
            info = os.stat(path)
            want = (mode | (mode & 0o444) >> 2) if not name else mode  # folders: x with r
            if info.st_uid == os.geteuid() and info.st_mode & 0o777 != want:
                os.chmod(path, want)
        except OSError:
            pass  # not ours, or gone: the owner's umask decided


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class DiskStore(KernelStore):
    """The on-disk kernel store of one namespace; safe to share between processes.

    Args:
        directory: the cache root; default :func:`default_directory`.
        namespace: a :class:`Namespace`, or the digest of an existing one (used by the CLI).
    """

    def __init__(self, directory: str | None = None, *, namespace: Namespace | str):
        self.directory = os.path.abspath(os.path.expanduser(directory or default_directory()))
        self.namespace = namespace if isinstance(namespace, Namespace) else None
        self.digest = namespace.digest() if isinstance(namespace, Namespace) else namespace
        if not DIGEST_NAME.match(self.digest):
            raise ValueError(f"not a namespace digest: {self.digest!r}")
        self.root = os.path.join(self.directory, self.digest)
        self.artifact_dir = os.path.join(self.root, "artifacts")
        self._index_dir = os.path.join(self.root, "index")
        # A diskcache.Cache, or a readonly.ReadOnlyIndex; opened on first use.
        self._cache = None
        self._opened_id: tuple[int, int] | None = None
        self.read_only = False  # known once the index is open
        self.counters = {"hits": 0, "misses": 0, "adds": 0, "evicted": 0, "unusable": 0}
        # What went wrong with the index since the last look (verify reports it).
        self.index_problems: list[str] = []
        self._warn = WarnOnce()
        self._hits: diskcache.Cache | None = None  # per-key hit counts, opened on first hit
        self._sweep_pending = False  # the index was replaced: its artifacts are orphans

    # -- the index -------------------------------------------------------------------------

    def _index(self) -> diskcache.Cache:
        if self._cache is not None and self._index_file_id() != self._opened_id:
            # Deleted or replaced by another process (prune, a reset after corruption): an
            # open sqlite connection would go on using the unlinked file, unseen by others.
            self.close()
        if self._cache is None and not _writable(self.root):
            # A read-only cache (a pre-warmed one mounted read-only) serves what it holds.
            from kernel_cache.readonly import ReadOnlyIndex

            self._cache = ReadOnlyIndex(self._index_dir, _INDEX_SETTINGS["disk_min_file_size"])
            self.read_only = True
            self._opened_id = self._index_file_id()
        if self._cache is None:
            os.makedirs(self.artifact_dir, exist_ok=True)
            if self.namespace is not None and namespace_problem(self.directory, self.digest):
                # Missing, or garbage (a crash on a file system without atomic rename, a
                # hand edit): this store knows the fields, so it writes them back. For
                # people and the CLI only: a full disk must not keep the index from opening.
                try:
                    atomic_write(os.path.join(self.root, "namespace.json"),
                                 json.dumps(self.namespace.to_dict(), indent=1).encode())
                except OSError as exc:
                    logger.debug("namespace.json of %s not written (%s)", self.root, exc)
            try:
                self._cache = diskcache.Cache(self._index_dir, **_INDEX_SETTINGS)
            except sqlite3.OperationalError:
                raise  # busy or locked: transient, the file itself is fine
            except sqlite3.DatabaseError as exc:  # "file is not a database" and the like
                self._reset_index(exc)
                self._cache = diskcache.Cache(self._index_dir, **_INDEX_SETTINGS)
            self._opened_id = self._index_file_id()
            _follow_umask(self._index_dir)
            if self._sweep_pending:
                self._sweep_pending = False
                self._sweep_orphans(self._cache)
        return self._cache

    def _index_file_id(self) -> tuple[int, int] | None:
        try:
            info = os.stat(os.path.join(self._index_dir, "cache.db"))
        except FileNotFoundError:
            return None
        return info.st_dev, info.st_ino

    def _reset_index(self, exc: Exception) -> None:
        logger.warning("cache index %s is corrupt (%s); starting an empty one, entries will be "
                       "rebuilt", self._index_dir, exc)
        self.index_problems.append(f"corrupt index replaced by an empty one ({exc})")
        self._sweep_pending = True
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        shutil.rmtree(self._index_dir, ignore_errors=True)

    # Artifacts of a replaced index older than this are orphans; younger ones may belong to
    # an add that could not reach the index and is about to load its file.
    ORPHAN_MIN_AGE_S = 10.0

    def _sweep_orphans(self, index: diskcache.Cache) -> None:
        """After an index was replaced, the artifacts it referenced are referenced by nothing:
        delete them now rather than at the next ``verify``."""
        try:
            removed = self._sweep(index, time.time() - self.ORPHAN_MIN_AGE_S)
        except (sqlite3.Error, diskcache.Timeout, OSError) as exc:
            logger.debug("orphaned artifacts of %s left for verify (%s)", self.root, exc)
            return
        if removed:
            logger.warning("removed %d artifacts the replaced index of %s referenced", removed,
                           self.root)

    def _guarded(self, action: str, fallback, fn):
        """Run ``fn(index)``; index trouble is logged and yields ``fallback``, never raises.

        A corrupt index is replaced by an empty one and ``fn`` tried once more on it.
        """
        for attempt in range(2):
            try:
                return fn(self._index())
            # Locked past the timeout, an I/O error, an unwritable folder: not worth a crash.
            except (sqlite3.OperationalError, diskcache.Timeout, OSError) as exc:
                self.index_problems.append(f"index unavailable while {action} ({exc})")
                self._warn(("index", os_error_cause(exc)),
                           "cache index %s unavailable while %s (%s); treating it as empty",
                           self._index_dir, action, exc)
                self.close()  # reconnect next time, e.g. after the folder was deleted
                return fallback
            except sqlite3.DatabaseError as exc:
                if attempt:
                    self.index_problems.append(f"index unreadable while {action} ({exc})")
                    return fallback
                self._reset_index(exc)
        return fallback

    def _records(self, index: diskcache.Cache, key: bytes) -> list[dict]:
        raw = index.get(key)
        if raw is None:
            return []
        try:
            records = json.loads(raw)
            if isinstance(records, list) and all(map(is_record, records)):
                return records
        except (ValueError, TypeError):
            pass
        # Unreadable: behave as a miss; the next add for this key overwrites it.
        logger.warning("unreadable cache record for key %s; it will be rebuilt", describe_key(key))
        return []

    def _put_records(self, index: diskcache.Cache, key: bytes, records: list[dict]) -> None:
        if records:
            index.set(key, json.dumps(records), retry=True)
        else:
            index.delete(key, retry=True)

    def artifact_path(self, sha256: str) -> str:
        return os.path.join(self.artifact_dir, sha256 + ARTIFACT_SUFFIX)

    def _entry(self, key: bytes, record: dict) -> Entry:
        return Entry(key, record["variant_id"], self.artifact_path(record["sha256"]),
                     record["metadata"])

    # -- KernelStore -----------------------------------------------------------------------

    def get(self, key: bytes) -> list[Entry]:
        key = check_key(key)
        # Nothing is stored before the index exists: such a lookup is one stat, and leaves
        # making the index (about 10 ms) to the first add. A fresh cache's first run
        # looks up every kernel it misses, on the caller's thread, while the compile
        # service's first kernel is still seconds away.
        if self._cache is None and self._index_file_id() is None:
            self.counters["misses"] += 1
            return []
        entries = self._checked_entries(key)
        self.counters["hits" if entries else "misses"] += 1
        if entries:
            self._count_hit(key)
        return entries

    def _checked_entries(self, key: bytes) -> list[Entry]:
        entries = []
        for record in self._guarded("reading", [], lambda index: self._records(index, key)):
            if file_problem(self.artifact_path(record["sha256"]), record) is None \
                    or not self._evict_broken(key, record):
                entries.append(self._entry(key, record))
        return entries

    def _count_hit(self, key: bytes) -> None:
        """Persistent per-key hit counts, for ``python -m kernel_cache list``; best effort (a
        disk hit is one load per process, so this is one small write per kernel loaded)."""
        if self.read_only:
            return
        try:
            if self._hits is None:
                self._hits = diskcache.Cache(os.path.join(self.root, "hits"), **_INDEX_SETTINGS)
                _follow_umask(os.path.join(self.root, "hits"))
            self._hits.incr(key, retry=True)
        except (sqlite3.Error, diskcache.Timeout, OSError) as exc:
            logger.debug("hit count of %s not kept (%s)", describe_key(key), exc)

    def hit_counts(self) -> dict[bytes, int]:
        """Disk hits per key, over every process that used this cache."""
        try:
            if self._hits is None and not os.path.isdir(os.path.join(self.root, "hits")):
                return {}
            if self._hits is None:
                self._hits = diskcache.Cache(os.path.join(self.root, "hits"), **_INDEX_SETTINGS)
            return {key: self._hits.get(key, 0) for key in self._hits.iterkeys()}
        except (sqlite3.Error, diskcache.Timeout, OSError):
            return {}

    def _evict_broken(self, key: bytes, record: dict) -> bool:
        """Evict a variant whose artifact failed its check; False if it was repaired since."""
        path = self.artifact_path(record["sha256"])
        if self.read_only:
            self.counters["unusable"] += 1
            log_evicted(key, record["variant_id"], file_problem(path, record) or "broken",
                        action="skipped (the cache is read-only)")
            return True

        def evict(index):
            # Check again under the lock: another process may have re-added the same bytes.
            with index.transact(retry=True):
                why = file_problem(path, record)
                if why is not None:
                    others = [r for r in self._records(index, key)
                              if r["variant_id"] != record["variant_id"]]
                    self._put_records(index, key, others)
                    _unlink(path)  # named by content: every record using it is broken too
                return why

        why = self._guarded("evicting", "index unavailable", evict)
        if why is None:
            return False
        self.counters["evicted"] += 1
        log_evicted(key, record["variant_id"], why)
        return True

    def add(self, key: bytes, artifact: bytes, metadata: dict) -> Entry:
        """Store a variant; raises OSError if the artifact cannot be written (disk full...).

        Nothing partial is left behind on failure.
        """
        key = check_key(key)
        record = make_record(artifact, metadata)
        path = self.artifact_path(record["sha256"])
        self._index()
        if self.read_only:
            raise OSError(errno.EROFS, "the kernel cache is read-only", self.directory)
        write_failed = []

        def store(index):
            # The file is written inside the transaction so an evict or clear in another
            # process cannot unlink it between our write and our record.
            with index.transact(retry=True):
                try:
                    atomic_write(path, bytes(artifact))
                except OSError as exc:  # the artifact's fault (disk full), not the index's
                    write_failed.append(exc)
                    return True
                records = self._records(index, key)
                if all(r["variant_id"] != record["variant_id"] for r in records):
                    self._put_records(index, key, records + [dict(record, added=time.time())])
            return True

        if not self._guarded("adding", False, store) and not write_failed:
            # The caller can still load this artifact; it is just not indexed for next time.
            atomic_write(path, bytes(artifact))
        if write_failed:
            raise write_failed[0]
        self.counters["adds"] += 1
        return self._entry(key, record)

    def evict(self, key: bytes, variant_id: str) -> None:
        key = check_key(key)

        def drop(index):
            with index.transact(retry=True):
                records = self._records(index, key)
                gone = [r for r in records if r["variant_id"] == variant_id]
                if not gone:
                    return
                self._put_records(index, key, [r for r in records if r not in gone])
                # Another key may hold the same bytes; only unlink the last reference.
                if gone[0]["sha256"] not in self._referenced(index):
                    _unlink(self.artifact_path(gone[0]["sha256"]))

        self._guarded("evicting", None, drop)

    def clear(self) -> None:
        def wipe(index):
            with index.transact(retry=True):
                index.clear(retry=True)
                self._remove_files(lambda name: True)
            return True

        if not self._guarded("clearing", False, wipe):
            self._remove_files(lambda name: True)  # the index was unusable: files still go
        if not self.read_only:
            shutil.rmtree(os.path.join(self.root, "hits"), ignore_errors=True)
            if self._hits is not None:
                self._hits.close()
                self._hits = None

    def stats(self) -> dict:
        items = self.items()
        return {"directory": self.directory, "namespace": self.digest, "keys": len(items),
                "variants": sum(len(records) for _, records in items),
                "artifact_bytes": self._artifact_bytes(), **self.counters}

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._hits is not None:
            self._hits.close()
            self._hits = None

    # -- maintenance (used by the CLI) -----------------------------------------------------

    def items(self) -> list[tuple[bytes, list[dict]]]:
        """Every key with its raw records, unverified."""
        return self._guarded("listing", [], lambda index: [
            (key, self._records(index, key)) for key in index.iterkeys()])

    def verify(self) -> dict:
        """Check every artifact, evict broken ones and delete stray files; returns counts,
        and ``index_problems``: what kept the index from being read (empty when it was)."""
        before = dict(self.counters)
        self.index_problems = []
        items = self.items()
        for key, _ in items:
            self._checked_entries(key)  # not a hit: verify is not a use
        checked = sum(len(records) for _, records in items)
        evicted = self.counters["evicted"] - before["evicted"]
        unusable = self.counters["unusable"] - before["unusable"]  # read-only: left in place
        stray = 0 if self.read_only else self.collect_garbage()
        return {"checked": checked, "ok": checked - evicted - unusable, "evicted": evicted,
                "unusable": unusable, "read_only": self.read_only, "stray_files_removed": stray,
                "index_problems": list(self.index_problems)}

    def collect_garbage(self, min_age_s: float = 60.0) -> int:
        """Remove artifacts no record references and temporary files left by a crash.

        Runs under the index lock, so no add is mid-write; ``min_age_s`` spares files an add
        wrote while the index was unavailable (those are in use but never indexed).
        """
        return self._guarded("collecting garbage", 0,
                             lambda index: self._sweep(index, time.time() - min_age_s))

    def _sweep(self, index: diskcache.Cache, older_than: float) -> int:
        with index.transact(retry=True):
            keep = {sha + ARTIFACT_SUFFIX for sha in self._referenced(index)}
            return self._remove_files(lambda name: name not in keep, older_than=older_than)

    def _referenced(self, index: diskcache.Cache) -> set[str]:
        return {r["sha256"] for key in index.iterkeys() for r in self._records(index, key)}

    def _remove_files(self, should_remove, older_than: float | None = None) -> int:
        removed = 0
        for name in self._artifact_names():
            path = os.path.join(self.artifact_dir, name)
            try:
                if should_remove(name) and (older_than is None
                                            or os.path.getmtime(path) < older_than):
                    os.unlink(path)
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def _artifact_names(self) -> list[str]:
        try:
            return [name for name in os.listdir(self.artifact_dir)
                    if name.endswith(ARTIFACT_SUFFIX) or name.startswith(".tmp-")]
        except FileNotFoundError:
            return []

    def _artifact_bytes(self) -> int:
        total = 0
        for name in self._artifact_names():
            try:
                total += os.path.getsize(os.path.join(self.artifact_dir, name))
            except FileNotFoundError:
                pass
        return total
