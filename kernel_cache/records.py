"""Variant records and artifact files, shared by every store.

A record is the JSON-serializable dict a store keeps per variant::

    {"variant_id": "5b0f...", "sha256": "<64 hex>", "size": 102400, "metadata": {...}}

The artifact's hash and size are recorded at ``add`` and checked on every load, so a file that
went missing, was truncated by a crash or was overwritten with garbage is caught before the
caller ``dlopen``s it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import tempfile
import threading

logger = logging.getLogger("eagerc.kernel_cache")

VARIANT_ID_LENGTH = 16
_RECORD_FIELDS = frozenset({"variant_id", "sha256", "size", "metadata"})


def is_record(value) -> bool:
    """Whether ``value`` (parsed from a store) has the shape :func:`make_record` gives."""
    return isinstance(value, dict) and _RECORD_FIELDS <= value.keys()


def check_key(key: bytes) -> bytes:
    """Keys are bytes so that no store has to guess an encoding."""
    if not isinstance(key, bytes):
        raise TypeError(f"cache keys must be bytes, got {type(key).__name__}; encode it first")
    return key


def make_record(artifact: bytes, metadata: dict) -> dict:
    """The record for one variant; its id depends only on the artifact and the metadata.

    >>> a = make_record(b"code", {"guard": 1})
    >>> a["variant_id"] == make_record(b"code", {"guard": 1})["variant_id"]
    True
    >>> a["variant_id"] == make_record(b"code", {"guard": 2})["variant_id"]
    False
    """
    if not isinstance(artifact, (bytes, bytearray, memoryview)):
        raise TypeError(f"artifact must be bytes, got {type(artifact).__name__}")
    try:
        canonical = json.dumps(metadata, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cache metadata must be JSON-serializable ({exc}); "
                        "store strings, numbers, lists and dicts only") from exc
    sha = hashlib.sha256(artifact).hexdigest()
    # Deterministic ids let every tier and every process agree on a variant, which makes
    # add idempotent and back-filling one tier from another a plain add.
    variant_id = hashlib.sha256(f"{sha}:{canonical}".encode()).hexdigest()[:VARIANT_ID_LENGTH]
    return {"variant_id": variant_id, "sha256": sha, "size": len(artifact),
            "metadata": json.loads(canonical)}


def artifact_problem(data: bytes | None, record: dict) -> str | None:
    """Why ``data`` is not the artifact ``record`` describes, or None if it is."""
    if data is None:
        return "artifact missing"
    if len(data) != record["size"]:
        what = "truncated" if len(data) < record["size"] else "has the wrong size"
        return f"artifact {what} ({len(data)} of {record['size']} bytes)"
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        return "artifact content does not match its sha256 (corrupted)"
    return None


def file_problem(path: str, record: dict) -> str | None:
    """Like :func:`artifact_problem` for a file, reading it once."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        data = None
    except OSError as exc:
        return f"artifact unreadable ({exc.strerror or exc})"
    return artifact_problem(data, record)


def describe_key(key: bytes) -> str:
    """A key for people: its leading printable fields (NUL-separated, shown as "|"), then a
    short digest of the whole key, e.g. ``op|eagerc|aten::add.Tensor|…#3f2a9c1d``."""
    fields = []
    for field in key.split(b"\0"):
        text = field.decode("ascii", "replace")
        if not field or not text.isprintable() or len(text) > 80:
            fields.append("…")
            break
        fields.append(text)
    return "|".join(fields) + "#" + hashlib.sha256(key).hexdigest()[:8]


def log_evicted(key: bytes, variant_id: str, why: str,
                action: str = "evicted; it will be rebuilt") -> None:
    logger.warning("broken cache entry %s variant %s: %s; %s", describe_key(key), variant_id,
                   why, action)


class WarnOnce:
    """One WARNING per cause for the life of this object; repeats of a cause go to DEBUG.

    A full disk or a read-only cache fails every miss the same way: the first says so, the
    rest would only bury other messages.
    """

    def __init__(self, log: logging.Logger = logger):
        self._log = log
        self._said: set = set()
        self._lock = threading.Lock()

    def __call__(self, cause, message: str, *args) -> bool:
        """Log ``message % args``; True when it was the WARNING (the cause's first time)."""
        with self._lock:
            first = cause not in self._said
            self._said.add(cause)
        self._log.log(logging.WARNING if first else logging.DEBUG, message, *args)
        return first


def os_error_cause(exc: BaseException) -> str:
    """A cause for :class:`WarnOnce`: the errno's name (``ENOSPC``), else the type's name."""
    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code, type(exc).__name__) if code else type(exc).__name__


def file_mode() -> int:
    """0666 less the umask, what ``open()`` would give: a cache warmed by one user serves
    others as their umask allows (``mkstemp`` alone would leave every artifact 0600)."""
    try:
        with open("/proc/self/status") as f:  # Linux: read without changing it
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:  # elsewhere: the only way to read it is to set it
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


_umask_lock = threading.Lock()


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either nothing or all of it.

    The temporary file sits in the same directory, so ``os.replace`` is a rename within one
    file system (atomic on POSIX and Windows). On any failure the temporary file is removed.
    The file gets the mode a plain ``open()`` would (0666 less the umask).
    """
    directory = os.path.dirname(path)
    # Cheap next to compiling a kernel, and it survives the folder being deleted under a
    # running process (`python -m kernel_cache prune` from another shell).
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, file_mode())
            f.write(data)
            f.flush()
            # Without fsync a power loss after the rename can leave a named but empty file.
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
