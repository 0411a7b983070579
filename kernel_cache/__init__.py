"""kernel_cache: persistent storage for compiled kernels (key bytes -> artifact + metadata).

Storage only: it knows nothing of torch or eagerc. The caller picks the key and the
:class:`Namespace`; the store keeps artifacts atomically, verifies them on load and evicts
broken ones with a log line instead of failing.

    >>> import tempfile
    >>> ns = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
    ...                target_arch="cpu-avx2", compiler_settings="0")
    >>> store = open_store(ns, directory=tempfile.mkdtemp())
    >>> entry = store.add(b"aten::relu|f32|rank2", b"\\x7fELF...", {"guards": []})
    >>> store.get(b"aten::relu|f32|rank2") == [entry]
    True

Modules: ``namespace`` (the key namespace), ``interface`` (the store ABC), ``disk`` and
``remote`` (the tiers), ``tiered`` (the chain of tiers), ``layout`` (the folders on disk),
``records`` (variant records and atomic files), ``remote_stats`` (counters the Redis tier
keeps), ``__main__`` (the CLI, ``python -m kernel_cache --help``).
"""
from __future__ import annotations

import os

from kernel_cache.disk import DiskStore
from kernel_cache.interface import Entry, KernelStore
from kernel_cache.namespace import Namespace
from kernel_cache.records import logger
from kernel_cache.remote import RedisStore
from kernel_cache.tiered import TieredStore

ENV_REMOTE = "EAGERC_REMOTE_CACHE"

__all__ = [
    "Namespace",
    "Entry",
    "KernelStore",
    "DiskStore",
    "RedisStore",
    "TieredStore",
    "open_store",
]


def open_store(namespace: Namespace, directory: str | None = None) -> KernelStore:
    """The default store: the disk cache, plus a Redis tier when ``EAGERC_REMOTE_CACHE`` is set.

    ``directory`` defaults to ``$EAGERC_CACHE_DIR``, else ``~/.cache/eagerc``. A remote tier
    that cannot be used (package missing, unknown URL scheme) is reported with a WARNING and
    left out: the local cache still works. A server that is down is reported once and tried
    again with backoff (1 s, 2 s, ... 30 s), so one that comes back is used again.

        >>> import tempfile
        >>> store = open_store(Namespace(1, "2.13", "0.1", "cpu", "0"), tempfile.mkdtemp())
        >>> type(store).__name__  # EAGERC_REMOTE_CACHE=redis://host:6379/0 adds a RedisStore
        'DiskStore'
    """
    disk = DiskStore(directory, namespace=namespace)
    url = os.environ.get(ENV_REMOTE)
    if not url:
        return disk
    if not url.startswith(("redis://", "rediss://", "unix://")):
        logger.warning("%s=%r is not a redis:// URL; using the local cache alone", ENV_REMOTE,
                       url)
        return disk
    try:
        # A server that is down now is tried again later (with backoff), not given up on.
        remote = RedisStore(url, namespace=namespace, local_dir=disk.directory,
                            require_server=False)
    except ImportError as exc:
        logger.warning("remote cache disabled: %s", exc)
        return disk
    return TieredStore([disk, remote])
