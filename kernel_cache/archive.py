"""One portable file for a warmed cache: export on one machine, import on others.

An archive is a gzip'd tar holding ``manifest.json`` (the archive format, and per
namespace its fields and records: key, metadata, artifact sha256) and one file per
artifact under ``artifacts/<sha256>``. Importing re-checks every artifact's sha256 and adds
it through :class:`DiskStore` (so an import is as safe as a compile's store: atomic files,
idempotent adds). A namespace the importing machine cannot use (another torch, another
arch) is refused with the reason, and none of its entries are written.

    >>> import tempfile, os
    >>> from kernel_cache import DiskStore, Namespace
    >>> src, dst = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> ns = Namespace(1, "2.13.0", "0.1.0", "cpu-avx2", "0")
    >>> _ = DiskStore(src, namespace=ns).add(b"op\\0cpu\\0aten::abs\\0sig", b"lib", {"op": "aten::abs"})
    >>> path = os.path.join(src, "cache.tar.gz")
    >>> export_cache(src, path)["entries"]
    1
    >>> import_cache(dst, path)["imported"]
    1
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
from typing import Callable, Optional

from kernel_cache.disk import DiskStore
from kernel_cache.layout import list_namespaces, namespace_fields
from kernel_cache.namespace import Namespace

ARCHIVE_FORMAT = 1
# accept(namespace fields) -> None to import the namespace, or the reason it is refused.
Acceptor = Callable[[dict], Optional[str]]


def export_cache(directory: str, path: str, namespaces: list[str] | None = None) -> dict:
    """Write every usable entry of `directory` (or of the given namespace digests) to the
    archive `path`; broken entries (missing or corrupt files) are skipped. Returns counts."""
    manifest = {"format": ARCHIVE_FORMAT, "namespaces": {}}
    counts = {"namespaces": 0, "entries": 0, "skipped": 0, "bytes": 0}
    written = set()
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for digest in list_namespaces(directory):
            if namespaces and digest not in namespaces:
                continue
            fields = namespace_fields(directory, digest)
            if fields is None:
                continue  # no namespace.json: nothing says what these kernels are for
            store = DiskStore(directory, namespace=digest)
            records = []
            for key, raw in store.items():
                for record in raw:
                    data = _read(store.artifact_path(record["sha256"]))
                    if data is None or hashlib.sha256(data).hexdigest() != record["sha256"]:
                        counts["skipped"] += 1
                        continue
                    if record["sha256"] not in written:
                        _add_file(tar, f"artifacts/{record['sha256']}", data)
                        written.add(record["sha256"])
                        counts["bytes"] += len(data)
                    records.append({"key": base64.b64encode(key).decode(),
                                    "sha256": record["sha256"], "metadata": record["metadata"]})
            store.close()
            manifest["namespaces"][digest] = {"fields": fields, "records": records}
            counts["namespaces"] += 1
            counts["entries"] += len(records)
        _add_file(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
    os.replace(tmp, path)
    return counts


def import_cache(directory: str, path: str, accept: Acceptor | None = None) -> dict:
    """Add the archive's entries to the cache in `directory`. Returns counts and, per
    refused namespace, the reason (`refused`: {digest: reason})."""
    counts = {"imported": 0, "already_present": 0, "corrupt": 0, "refused": {}}
    with tarfile.open(path, "r:gz") as tar:
        manifest = json.loads(_member(tar, "manifest.json"))
        if manifest.get("format") != ARCHIVE_FORMAT:
            raise ValueError(f"{path}: archive format {manifest.get('format')!r}, this kernel_cache "
                             f"reads format {ARCHIVE_FORMAT}")
        for digest, section in manifest["namespaces"].items():
            namespace = Namespace.from_dict(section["fields"])
            if namespace.digest() != digest:
                counts["refused"][digest] = "its fields do not match its digest (edited archive?)"
                continue
            reason = accept(section["fields"]) if accept else None
            if reason:
                counts["refused"][digest] = reason
                continue
            store = DiskStore(directory, namespace=namespace)
            for record in section["records"]:
                key = base64.b64decode(record["key"])
                data = _member(tar, f"artifacts/{record['sha256']}")
                if hashlib.sha256(data).hexdigest() != record["sha256"]:
                    counts["corrupt"] += 1
                    continue
                before = {e.variant_id for e in store.get(key)}
                entry = store.add(key, data, record["metadata"])
                counts["already_present" if entry.variant_id in before else "imported"] += 1
            store.close()
    return counts


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    try:
        f = tar.extractfile(name)
    except KeyError:
        f = None
    if f is None:
        raise ValueError(f"{tar.name}: no {name} in the archive")
    return f.read()
