"""The namespace every cache entry lives under.

A compiled kernel is only valid for the exact toolchain that produced it, so each entry is
stored under a digest of everything that shapes the generated code. Bumping any field (a new
torch, a new eagerc, another CPU or GPU, other compiler settings) yields another digest: the
old entries are simply never looked up again, and ``python -m kernel_cache prune`` can delete
them.

Example: the namespace of an eagerc 0.1.0 CPU build and one cache key under it

    >>> ns = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
    ...                target_arch="cpu-avx512", compiler_settings="3f2a9c01")
    >>> ns.digest()
    'cad8dc8f1bccdbcb'
    >>> key = b"aten::add.Tensor|f32,f32|rank2|contiguous"  # opaque bytes chosen by the caller

On disk that entry lives in ``~/.cache/eagerc/cad8dc8f1bccdbcb/`` (see ``kernel_cache.disk``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json

# The layout of kernel_cache's own records. It is folded into every digest so that a change of
# the record format retires old entries exactly like a torch upgrade does, without the caller
# having to know about it.
LAYOUT_VERSION = 1

DIGEST_LENGTH = 16  # hex characters: 64 bits, ample for a handful of namespaces per machine


@dataclasses.dataclass(frozen=True)
class Namespace:
    """Everything that decides whether a stored kernel may be reused.

    Args:
        format_version: the caller's artifact format; bump it when the artifact ABI changes.
        torch_version: ``torch.__version__`` of the process that compiles.
        eagerc_version: ``eagerc.__version__``.
        target_arch: what Inductor generates code for, e.g. ``"cpu-avx512"`` or ``"cuda-sm90"``.
        compiler_settings: a digest of the Inductor settings, computed by the caller.
    """

    format_version: int
    torch_version: str
    eagerc_version: str
    target_arch: str
    compiler_settings: str

    def to_dict(self) -> dict:
        """The fields as a plain dict, e.g. for ``namespace.json``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict) -> Namespace:
        """Inverse of :meth:`to_dict`; unknown keys are an error.

        >>> ns = Namespace(1, "2.13.0", "0.1.0", "cpu-avx2", "0")
        >>> Namespace.from_dict(ns.to_dict()) == ns
        True
        """
        return cls(**fields)

    def digest(self) -> str:
        """A short hex string naming this namespace; equal fields give an equal digest.

        >>> a = Namespace(1, "2.13.0", "0.1.0", "cpu-avx2", "0")
        >>> a.digest() == Namespace(1, "2.13.0", "0.1.0", "cpu-avx2", "0").digest()
        True
        >>> a.digest() == Namespace(1, "2.14.0", "0.1.0", "cpu-avx2", "0").digest()
        False
        """
        fields = dict(self.to_dict(), layout_version=LAYOUT_VERSION)
        # sort_keys: the digest must not depend on field order, only on values.
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]
