"""Where the disk cache lives, and its folders (no diskcache, no store logic here).

Layout (one folder per namespace, so retiring a namespace is deleting a folder)::

    <directory>/                    $EAGERC_CACHE_DIR, else ~/.cache/eagerc
        <namespace digest>/         e.g. cad8dc8f1bccdbcb (see kernel_cache.namespace)
            namespace.json          the Namespace fields, for people and the CLI
            index/cache.db          diskcache: key bytes -> JSON list of variant records
            artifacts/<sha256>.so   the artifacts, named by the sha256 of their content
            remote/<sha256>.so      artifacts fetched from a RedisStore (kernel_cache.remote)

    >>> import tempfile
    >>> from kernel_cache import DiskStore, Namespace
    >>> root = tempfile.mkdtemp()
    >>> _ = DiskStore(root, namespace=Namespace(1, "2.13", "0.1", "cpu", "0")).add(b"k", b"", {})
    >>> sorted(os.listdir(os.path.join(root, list_namespaces(root)[0])))
    ['artifacts', 'index', 'namespace.json']
"""
from __future__ import annotations

import json
import os
import re
import shutil

ENV_DIR = "EAGERC_CACHE_DIR"
ARTIFACT_SUFFIX = ".so"
DIGEST_NAME = re.compile(r"^[0-9a-f]{16}$")


def default_directory() -> str:
    """``$EAGERC_CACHE_DIR`` if set, else ``~/.cache/eagerc``; read on every call."""
    return os.path.abspath(os.path.expanduser(os.environ.get(ENV_DIR) or "~/.cache/eagerc"))


def list_namespaces(directory: str) -> list[str]:
    """Digests of the namespace folders under ``directory``; other files are not ours."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [name for name in names if DIGEST_NAME.match(name)
            and (os.path.isdir(os.path.join(directory, name, "index"))
                 or os.path.isfile(os.path.join(directory, name, "namespace.json")))]


def namespace_fields(directory: str, digest: str) -> dict | None:
    """The fields saved in ``namespace.json``, or None when absent or broken
    (:func:`namespace_problem` says which)."""
    return None if namespace_problem(directory, digest) else _read_fields(directory, digest)


def namespace_problem(directory: str, digest: str) -> str | None:
    """What is wrong with a namespace's ``namespace.json``: None when it names this digest,
    ``"no namespace.json"``, or ``"namespace.json is broken (...)"``.

        >>> import tempfile
        >>> root = tempfile.mkdtemp(); os.makedirs(os.path.join(root, "0123456789abcdef"))
        >>> namespace_problem(root, "0123456789abcdef")
        'no namespace.json'
        >>> _ = open(os.path.join(root, "0123456789abcdef", "namespace.json"), "w").write("{x")
        >>> namespace_problem(root, "0123456789abcdef")[:41]
        'namespace.json is broken (JSONDecodeError'
    """
    from kernel_cache.namespace import Namespace

    try:
        fields = _read_fields(directory, digest)
    except FileNotFoundError:
        return "no namespace.json"
    except (OSError, ValueError) as exc:
        return f"namespace.json is broken ({type(exc).__name__}: {exc})"
    try:
        named = Namespace.from_dict(fields).digest()
    except (TypeError, AttributeError) as exc:
        return f"namespace.json is broken (not the fields of a namespace: {exc})"
    if named != digest:
        return f"namespace.json is broken (its fields are those of namespace {named})"
    return None


def _read_fields(directory: str, digest: str) -> dict:
    with open(os.path.join(directory, digest, "namespace.json")) as f:
        return json.load(f)


def remove_namespace(directory: str, digest: str) -> None:
    """Delete one namespace folder; refuses anything that is not one."""
    if digest not in list_namespaces(directory):
        raise ValueError(f"{digest!r} is not a cache namespace in {directory}")
    shutil.rmtree(os.path.join(directory, digest))
