"""The store interface every cache tier implements (disk, Redis, a tiered combination).

A key is opaque bytes chosen by the caller (eagerc uses the op's signature). One key may hold
several *variants*: compiled artifacts each valid under its own guards, which the caller keeps
in ``metadata`` and checks itself; the store never interprets metadata.

    >>> import tempfile
    >>> from kernel_cache import DiskStore, Namespace
    >>> store = DiskStore(tempfile.mkdtemp(), namespace=Namespace(1, "2.13", "0.1", "cpu", "0"))
    >>> entry = store.add(b"aten::abs|f32", b"\\x7fELF...", {"guards": ["rank == 2"]})
    >>> [e.variant_id for e in store.get(b"aten::abs|f32")] == [entry.variant_id]
    True
"""
from __future__ import annotations

import abc
import dataclasses


@dataclasses.dataclass(frozen=True)
class Entry:
    """One stored variant.

    Attributes:
        key: the key it was stored under.
        variant_id: names the variant within its key; the same artifact and metadata get the
            same id in every store and every process, so tiers agree on it.
        artifact_path: a file on local disk holding the artifact, ready to ``dlopen``. Its
            content never changes while it exists (files are named by their content hash).
        metadata: the JSON-serializable dict given to :meth:`KernelStore.add`.
    """

    key: bytes
    variant_id: str
    artifact_path: str
    metadata: dict = dataclasses.field(default_factory=dict)


class KernelStore(abc.ABC):
    """Maps a key to the compiled variants stored under it.

    Broken entries (missing, truncated or corrupted artifacts) are never returned: ``get``
    evicts them with one WARNING on the ``eagerc.kernel_cache`` logger so the caller rebuilds.
    """

    @abc.abstractmethod
    def get(self, key: bytes) -> list[Entry]:
        """All valid variants stored under ``key``, oldest first; ``[]`` on a miss."""

    @abc.abstractmethod
    def add(self, key: bytes, artifact: bytes, metadata: dict) -> Entry:
        """Store ``artifact`` as one more variant of ``key`` and return its entry.

        Adding the same artifact with the same metadata again returns the existing entry.
        """

    @abc.abstractmethod
    def evict(self, key: bytes, variant_id: str) -> None:
        """Remove one variant; a variant that is not there is ignored."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry of this store's namespace."""

    @abc.abstractmethod
    def stats(self) -> dict:
        """Counters of this process (hits, misses, adds, evicted) and stored totals."""

    def close(self) -> None:
        """Release connections; the store may not be used afterwards."""

    def __enter__(self) -> KernelStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
