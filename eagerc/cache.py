"""The compile/cache service: a passive store of artifacts, with a per-key lock.

Its callers drive each step (op misses: eagerc/per_op/resolver.py; captured graphs:
eagerc/graph_kernels.py)::

    with service().locked(key):              # threads, and processes through a lock file
        hit = service().get(key, stat_key)   # disk, then the remote tier; loaded; raises a
        if hit is None:                      #   refusal recorded for the key
            ...                              # the caller checks and compiles; a refusal:
            service().refuse(key, refusal)   #   recorded when it is a property of the key
            hit = service().put(key, stat_key, artifact)   # stored, then loaded

L1 is the caller's (the C++ table for ops, which names the variants it already holds;
capture's record cache for graphs). The service owns the locks, the store lookups,
load-or-evict, what a refusal leaves on disk, the counters and the log lines; it never
calls back into its caller. A key (:class:`CacheKey`) and its components are
eagerc/kernel_key.py's: the service asks the key for its namespace and entry key, and logs
its components at DEBUG (logger ``eagerc.key``).

    >>> import eagerc.cache as cache, eagerc.targets as targets
    >>> key = cache.CacheKey("op", targets.for_device("cpu"), "aten::abs", b"sig")
    >>> key.entry_key()
    b'op\\x00cpu\\x00aten::abs\\x00sig'
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import logging
import os
import tempfile
import threading
from typing import Any

from eagerc import _config, _stats
from eagerc.artifact import Artifact, pinned_terms
from eagerc.kernel_key import CacheKey, log_components
from eagerc.refusals import NOWHERE, CompileError, NotCompiled, causes, recorded

log = logging.getLogger("eagerc")


@dataclasses.dataclass
class Hit:
    """A loaded artifact: `kernel` (a `_C` artifact), the store `entry` it came from."""

    kernel: Any
    entry: Any          # kernel_cache.Entry (its metadata holds what the loader needs)
    from_disk: bool


_this_thread = threading.local()


def _held_keys() -> set:
    """The (namespace, entry) keys this thread holds the lock of."""
    if not hasattr(_this_thread, "keys"):
        _this_thread.keys = set()
    return _this_thread.keys


class CompileService:
    """Get and put over kernel_cache, under a per-key lock; one instance per process
    (:func:`service`). The caller drives: lock, get, compile, put (or refuse)."""

    def __init__(self):
        from kernel_cache.records import WarnOnce

        self._lock = threading.Lock()
        self._key_locks: dict = collections.defaultdict(threading.Lock)
        self._stores: dict = {}        # namespace digest -> store
        # A full or read-only cache fails every miss alike: one WARNING per cause.
        self._warn = WarnOnce(log)

    def _where(self, key: CacheKey):
        """(store, namespace digest, entry key) of `key`."""
        parts = key.namespace_components()
        namespace, digest = key.namespace_and_digest(parts)
        entry_key = key.entry_key()
        log_components(key, digest, parts)
        return self._store(namespace, digest), digest, entry_key

    @contextlib.contextmanager
    def locked(self, key: CacheKey):
        """Hold `key` against other threads and other processes (they wait, then find what
        this holder stored). A thread asking again for a key it holds (eager's reference run
        reached the op's own holder) would wait forever: it gets a CompileError that is
        remembered nowhere, and that call runs without a kernel."""
        _, digest, entry_key = self._where(key)
        held = _held_keys()
        if (digest, entry_key) in held:
            raise CompileError(f"{key.name} was called again while it compiles", NOWHERE)
        held.add((digest, entry_key))
        try:
            with self._key_lock(digest, entry_key), self._process_lock(entry_key, key.name):
                yield
        finally:
            held.discard((digest, entry_key))

    def get(self, key: CacheKey, stat_key: str, skip_variants=frozenset()) -> Hit | None:
        """The stored artifact of `key`, loaded (None: nothing usable is stored). A recorded
        refusal is raised, as the compile raised it. `skip_variants`: already in the
        caller's L1 (the C++ table). An entry that does not load is evicted."""
        store, _, entry_key = self._where(key)
        for entry in self._entries(store, entry_key):
            refusal = recorded(entry.metadata)
            if refusal is not None:
                raise refusal
            if entry.variant_id in skip_variants:
                continue
            try:
                kernel = _load(entry)
            except Exception as e:  # noqa: BLE001 - a broken entry is rebuilt, never a crash
                log.warning("eagerc: evicted an unloadable artifact of %s (%s); compiling it again",
                            key.name, e)
                with contextlib.suppress(Exception):
                    store.evict(entry_key, entry.variant_id)
                continue
            _stats.count(stat_key, "disk_loads")
            return Hit(kernel, entry, from_disk=True)
        return None

    def put(self, key: CacheKey, stat_key: str, artifact: Artifact) -> Hit:
        """Store a compiled artifact and load it."""
        store, _, entry_key = self._where(key)
        _stats.count(stat_key, "compiles")
        _stats.count(stat_key, "compile_seconds", artifact.seconds)
        log.info("eagerc: compiled %s in %.2f s", artifact.description, artifact.seconds)
        metadata = {**artifact.metadata, "op": key.name, "signature": artifact.description,
                    "compile_seconds": artifact.seconds}
        entry = self._add(store, entry_key, artifact.library, metadata)
        return Hit(_load(entry), entry, from_disk=False)

    def refuse(self, key: CacheKey, refusal: NotCompiled) -> None:
        """Record what a refusal leaves on disk (only what is a property of the key) and
        log it."""
        if _disk_full(refusal):
            self._warn("compile ENOSPC", "eagerc: a disk the compiler writes to is full "
                       "(%s; Inductor's cache is %s): ops without a kernel run uncompiled, "
                       "correct but slower, until space is freed", refusal,
                       _inductor_cache_dir())
        record = refusal.record()
        if record is not None:
            store, _, entry_key = self._where(key)
            self._add(store, entry_key, b"", {**record, "op": key.name, "num_outputs": 0})
        level, message = refusal.log_line(key.name)
        # At DEBUG a failure's whole chain (Inductor's own traceback) is logged: the
        # reason's first line rarely says where a code generator failed.
        log.log(level, "eagerc: %s", message,
                exc_info=refusal if refusal.is_failure and log.isEnabledFor(logging.DEBUG) else None)

    # Store access: a broken or unavailable store must not break the call.
    def _entries(self, store, entry_key: bytes) -> list:
        try:
            return store.get(entry_key)
        except Exception as e:  # noqa: BLE001
            self._warn(("get", _cause(e)), "eagerc: kernel cache unavailable (%s); compiling "
                       "without it", e)
            return []

    def _add(self, store, entry_key: bytes, library: bytes, metadata: dict):
        """Store an artifact; one the store cannot take (a read-only cache) still serves this
        process from a private file."""
        try:
            return store.add(entry_key, library, metadata)
        except Exception as e:  # noqa: BLE001
            self._warn(("add", _cause(e)), "eagerc: could not store %s in the kernel cache (%s); "
                       "it is kept for this process only (so are other kernels that cannot be "
                       "stored for this reason)", metadata.get("op"), e)
            import kernel_cache

            sha = hashlib.sha256(library).hexdigest()
            path = os.path.join(tempfile.gettempdir(), f"eagerc-unstored-{os.getpid()}", f"{sha}.so")
            if library and not os.path.exists(path):
                if not os.path.isdir(os.path.dirname(path)):
                    import atexit
                    import shutil

                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    atexit.register(shutil.rmtree, os.path.dirname(path), True)
                with open(path + ".tmp", "wb") as f:
                    f.write(library)
                os.replace(path + ".tmp", path)
            return kernel_cache.Entry(entry_key, sha, path, metadata)

    def _store(self, namespace, digest: str):
        with self._lock:
            store = self._stores.get(digest)
            if store is None:
                import kernel_cache

                store = kernel_cache.open_store(namespace)
                self._stores[digest] = store
            return store

    def _key_lock(self, digest: str, entry_key: bytes):
        with self._lock:
            return self._key_locks[(digest, entry_key)]

    @contextlib.contextmanager
    def _process_lock(self, entry_key: bytes, what: str):
        """Another process missing the same key waits for this one's compile, then loads it,
        for as long as this one makes progress (eagerc/compile/lock.py). A cache directory
        that cannot hold lock files (read-only) is used without one."""
        from kernel_cache.layout import default_directory

        from eagerc.compile.lock import key_lock

        # Where open_store puts the store. Created here if missing: processes that start
        # together on a new cache must already agree on one lock.
        directory = default_directory()
        name = hashlib.sha256(entry_key).hexdigest()[:32] + ".lock"
        folder = os.path.join(directory, "locks")
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            log.debug("eagerc: no process lock for a key (%s)", e)
        # A read-only cache gets none: what another process compiles it cannot store either,
        # so waiting for it gains nothing.
        if not os.access(folder, os.W_OK):
            yield
            return
        with key_lock(os.path.join(folder, name), what, _config.lock_stall_seconds(),
                      _config.lock_wait_seconds()):
            yield

    def reset(self) -> None:
        """Forget open stores (tests point EAGERC_CACHE_DIR elsewhere)."""
        with self._lock:
            for store in self._stores.values():
                with contextlib.suppress(Exception):
                    store.close()
            self._stores.clear()


def _load(entry):
    """The stored library of `entry` as a `_C` artifact (raises when it cannot load)."""
    import _eagerc as _C

    return _C._load_artifact(entry.variant_id, entry.artifact_path, int(entry.metadata["num_outputs"]),
                             pinned_terms(entry.metadata.get("guard", "")))


def _cause(e: BaseException) -> str:
    """What kind of failure `e` is, for one warning per cause (ENOSPC, EROFS, ...)."""
    from kernel_cache.records import os_error_cause

    return os_error_cause(e)


def _disk_full(e: BaseException | None) -> bool:
    """Whether `e` or an exception it chains is a full disk or quota (ENOSPC, EDQUOT)."""
    import errno

    return any(getattr(c, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
               or "No space left on device" in str(c) for c in causes(e))


def _inductor_cache_dir() -> str:
    try:  # what cache_dir() gives, without its makedirs on a full disk
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        return os.path.abspath(_config.inductor_cache_dir() or default_cache_dir())
    except Exception:  # noqa: BLE001 - only for the message
        return "$TORCHINDUCTOR_CACHE_DIR"


_service = None
_service_lock = threading.Lock()


def service() -> CompileService:
    """The process's compile/cache service (created on the first miss, not at import)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = CompileService()
        return _service

