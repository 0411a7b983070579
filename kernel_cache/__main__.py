"""Inspect, maintain and ship the on-disk kernel cache.

    $ python -m kernel_cache info            # where the cache is, what it holds
    $ python -m kernel_cache stats           # entries and bytes per target arch and per op
    $ python -m kernel_cache export c.tgz    # one portable archive of the whole cache
    $ python -m kernel_cache import c.tgz    # add it here (other torch or arch: refused)
    $ python -m kernel_cache verify          # check every artifact, evict broken ones
    $ python -m kernel_cache prune           # keep only the most recently written namespace
    $ python -m kernel_cache --dir /tmp/c clear

The CLI works on every namespace it finds in the directory; it needs no eagerc, and no
torch except `import`, which checks that this machine can run the archive's kernels.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from kernel_cache.archive import export_cache, import_cache
from kernel_cache.disk import DiskStore
from kernel_cache.records import describe_key
from kernel_cache.layout import (default_directory, list_namespaces, namespace_fields,
                                 remove_namespace)


def _describe(directory: str, digest: str) -> str:
    fields = namespace_fields(directory, digest)
    if fields is None:
        return f"namespace {digest} (no namespace.json)"
    return (f"namespace {digest}: torch {fields.get('torch_version')}, eagerc "
            f"{fields.get('eagerc_version')}, {fields.get('target_arch')}, settings "
            f"{fields.get('compiler_settings')}, format {fields.get('format_version')}")


def _last_written(directory: str, digest: str) -> float:
    """When a namespace was last written: its index changes on every add."""
    root = os.path.join(directory, digest)
    paths = [root] + [os.path.join(root, "index", name)
                      for name in ("cache.db", "cache.db-wal")]
    return max((os.path.getmtime(p) for p in paths if os.path.exists(p)), default=0.0)


def _stores(args) -> list[DiskStore]:
    digests = list_namespaces(args.dir)
    if args.namespace:
        missing = sorted(set(args.namespace) - set(digests))
        if missing:
            sys.exit(f"no namespace {', '.join(missing)} in {args.dir}; "
                     "`python -m kernel_cache info` lists them")
        digests = [d for d in digests if d in args.namespace]
    return [DiskStore(args.dir, namespace=digest) for digest in digests]


def cmd_info(args) -> int:
    print(f"cache directory: {args.dir}")
    totals = {"keys": 0, "variants": 0, "artifact_bytes": 0}
    stores = _stores(args)
    for store in stores:
        stats = store.stats()
        print(_describe(args.dir, store.digest) + (" (read-only)" if store.read_only else ""))
        print(f"  keys {stats['keys']}, variants {stats['variants']}, "
              f"artifact bytes {stats['artifact_bytes']}")
        for name in totals:
            totals[name] += stats[name]
    print(f"total: {len(stores)} namespaces, {totals['keys']} keys, {totals['variants']} "
          f"variants, {totals['artifact_bytes']} bytes")
    return 0


def cmd_stats(args) -> int:
    """Entries and bytes per target arch, per kind (op, graph) and per op."""
    by_arch, by_kind, by_op = {}, {}, {}

    def count(table, name, size):
        row = table.setdefault(name, [0, 0])
        row[0] += 1
        row[1] += size

    for store in _stores(args):
        arch = (namespace_fields(args.dir, store.digest) or {}).get("target_arch", "?")
        for key, records in store.items():
            kind = key.split(b"\0", 1)[0].decode(errors="replace")
            for record in records:
                size = record.get("size", 0)
                count(by_arch, arch, size)
                count(by_kind, kind, size)
                count(by_op, record["metadata"].get("op") or describe_key(key), size)
        store.close()
    for title, table, most in (("target arch", by_arch, None), ("kind", by_kind, None),
                               ("op", by_op, args.top)):
        print(f"{title:<40} {'entries':>8} {'bytes':>12}")
        rows = sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0]))
        for name, (entries, size) in rows[:most]:
            print(f"{name:<40.40} {entries:>8} {size:>12}")
        if most and len(rows) > most:
            print(f"... {len(rows) - most} more (--top N)")
        print()
    return 0


def cmd_export(args) -> int:
    counts = export_cache(args.dir, args.file, args.namespace)
    print(f"exported {counts['entries']} entries of {counts['namespaces']} namespaces "
          f"({counts['bytes']} artifact bytes) to {args.file}; skipped {counts['skipped']} broken")
    return 0


def cmd_import(args) -> int:
    """Exit status 1 when a namespace was refused or an artifact was corrupt."""
    accept = None
    if not args.no_check:
        from kernel_cache.environment import refusal_here

        accept = refusal_here
    counts = import_cache(args.dir, args.file, accept)
    for digest, reason in counts["refused"].items():
        print(f"refused namespace {digest}: {reason}")
    print(f"imported {counts['imported']} entries into {args.dir} ({counts['already_present']} "
          f"already present, {counts['corrupt']} corrupt, {len(counts['refused'])} namespaces "
          "refused)")
    return 1 if counts["refused"] or counts["corrupt"] else 0


def cmd_list(args) -> int:
    for store in _stores(args):
        print(_describe(args.dir, store.digest))
        for key, records in store.items():
            for record in records:
                print(f"  {key!r:.80} variant {record['variant_id']} {record['size']} bytes "
                      f"{json.dumps(record['metadata'], sort_keys=True):.100}")
    return 0


def cmd_verify(args) -> int:
    """Exit status 1 when broken entries had to stay (a read-only cache cannot evict)."""
    totals = {"checked": 0, "ok": 0, "evicted": 0, "unusable": 0, "stray_files_removed": 0}
    for store in _stores(args):
        result = store.verify()
        mode = " (read-only: broken entries stay, unused)" if result["read_only"] else ""
        print(f"{store.digest}{mode}: checked {result['checked']}, ok {result['ok']}, evicted "
              f"{result['evicted']}, broken left in place {result['unusable']}, stray files "
              f"removed {result['stray_files_removed']}")
        for name in totals:
            totals[name] += result[name]
    print(f"verified {totals['checked']} variants: {totals['ok']} ok, {totals['evicted']} "
          f"broken evicted, {totals['unusable']} broken left in place, "
          f"{totals['stray_files_removed']} stray files removed")
    return 1 if totals["unusable"] else 0


def cmd_clear(args) -> int:
    stores = _stores(args)
    for store in stores:
        # Emptied through the index, not deleted: running processes keep a usable cache.
        store.clear()
    print(f"cleared {len(stores)} namespaces in {args.dir}")
    return 0


def cmd_prune(args) -> int:
    digests = list_namespaces(args.dir)
    keep = set(args.keep or sorted(digests, key=lambda d: _last_written(args.dir, d))[-1:])
    removed = [digest for digest in digests if digest not in keep]
    for digest in removed:
        print(f"removing {_describe(args.dir, digest)}")
        remove_namespace(args.dir, digest)
    kept = ", ".join(sorted(keep & set(digests))) or "none"
    print(f"pruned {len(removed)} namespaces, kept {kept}")
    return 0


def main(argv: list[str] | None = None) -> int:
    summary, _, examples = __doc__.partition("\n")
    parser = argparse.ArgumentParser(prog="python -m kernel_cache", description=summary,
                                     epilog=examples,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=None,
                        help="cache directory (default: $EAGERC_CACHE_DIR or ~/.cache/eagerc)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, func, text in [
            ("info", cmd_info, "directory, namespaces, entry counts, bytes"),
            ("list", cmd_list, "every key and variant"),
            ("verify", cmd_verify, "check every artifact, evict broken ones"),
            ("clear", cmd_clear, "delete every entry (of all namespaces by default)")]:
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--namespace", action="append", metavar="DIGEST",
                         help="only this namespace (repeatable)")
        sub.set_defaults(func=func)
    stats = commands.add_parser("stats", help="entries and bytes per target arch, kind and op")
    stats.add_argument("--namespace", action="append", metavar="DIGEST")
    stats.add_argument("--top", type=int, default=30, help="ops to show (default 30)")
    stats.set_defaults(func=cmd_stats)
    export = commands.add_parser("export", help="write the cache to one portable archive")
    export.add_argument("file")
    export.add_argument("--namespace", action="append", metavar="DIGEST")
    export.set_defaults(func=cmd_export)
    imp = commands.add_parser("import", help="add an archive's entries to this cache")
    imp.add_argument("file")
    imp.add_argument("--no-check", action="store_true",
                     help="skip the torch version and arch check (the entries may never load)")
    imp.set_defaults(func=cmd_import)
    prune = commands.add_parser("prune", help="delete every namespace but the kept ones")
    prune.add_argument("--keep", action="append", metavar="DIGEST",
                       help="namespace to keep (repeatable; default: the most recently written)")
    prune.set_defaults(func=cmd_prune)
    args = parser.parse_args(argv)
    args.dir = os.path.abspath(os.path.expanduser(args.dir or default_directory()))
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
