"""Inspect, maintain and ship the on-disk kernel cache.

    $ python -m kernel_cache info            # where the cache is, what it holds
    $ python -m kernel_cache list            # one line per kernel: op, signature, size, age, hits
    $ python -m kernel_cache stats           # entries and bytes per target arch and per op
    $ python -m kernel_cache stats --remote  # the Redis tier's counters, over every host
    $ python -m kernel_cache export c.tgz    # one portable archive of the whole cache
    $ python -m kernel_cache import c.tgz    # add it here (other torch or arch: refused)
    $ python -m kernel_cache verify          # check every artifact, evict broken ones
    $ python -m kernel_cache prune           # keep only the most recently written namespace
    $ python -m kernel_cache clear --dir /tmp/c

Options go before or after the command. Exit status: 0 done, 1 something was found wrong
(verify, import), 2 bad input (a missing archive, an unknown namespace). The CLI works on
every namespace it finds in the directory; it needs no eagerc, and no torch except `import`,
which checks that this machine can run the archive's kernels.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import zlib

from kernel_cache.archive import export_cache, import_cache
from kernel_cache.disk import DiskStore
from kernel_cache.layout import (default_directory, list_namespaces, namespace_fields,
                                 namespace_problem, remove_namespace)
from kernel_cache.tables import describe_signature, human_age, human_bytes, print_table

PROG = "python -m kernel_cache"


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


def _describe(directory: str, digest: str) -> str:
    problem = namespace_problem(directory, digest)
    if problem:
        return f"namespace {digest} ({problem})"
    fields = namespace_fields(directory, digest)
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
            raise UsageError(f"no namespace {', '.join(missing)} in {args.dir}; "
                             "`python -m kernel_cache info` lists them")
        digests = [d for d in digests if d in args.namespace]
    return [DiskStore(args.dir, namespace=digest) for digest in digests]


def _no_kernel(metadata: dict) -> bool:
    """A record that holds no kernel: a remembered fallback, or a marker sending a
    signature elsewhere (to kernels specialized on its scalar values, or compiled to run on
    host aliases)."""
    return any(name in metadata for name in ("fallback", "specialize_values", "needs_host_aliases"))


def cmd_info(args) -> int:
    stores = _stores(args)
    print(f"cache directory: {args.dir}")
    totals = {"keys": 0, "variants": 0, "artifact_bytes": 0, "kernels": 0}
    for store in stores:
        stats = store.stats()
        stats["kernels"] = sum(1 for _, records in store.items() for record in records
                               if not _no_kernel(record["metadata"]))
        print(_describe(args.dir, store.digest) + (" (read-only)" if store.read_only else ""))
        print(f"  keys {stats['keys']}, variants {stats['variants']}, "
              f"artifact bytes {stats['artifact_bytes']} ({stats['kernels']} kernels)")
        for name in totals:
            totals[name] += stats[name]
    print(f"total: {len(stores)} namespaces, {totals['keys']} keys, {totals['variants']} "
          f"variants, {totals['artifact_bytes']} bytes ({totals['kernels']} kernels)")
    if totals["variants"] > totals["kernels"]:
        others = totals["variants"] - totals["kernels"]
        print(f"({others} {'entry holds' if others == 1 else 'entries hold'} no kernel: an op that runs "
              "its fallback, or a signature whose kernels are specialized on its scalar values "
              "or run on host aliases; `list` names them)")
    return 0


def cmd_stats(args) -> int:
    """Entries and bytes per target arch, per kind (op, graph) and per op."""
    if args.remote is not None:
        return _remote_stats(args)
    from kernel_cache.records import describe_key

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
    if args.json:
        print(json.dumps({title: {name: {"entries": n, "bytes": size}
                                  for name, (n, size) in table.items()}
                          for title, table in (("target_arch", by_arch), ("kind", by_kind),
                                               ("op", by_op))}, indent=1, sort_keys=True))
        return 0
    for title, table, most in (("target arch", by_arch, None), ("kind", by_kind, None),
                               ("op", by_op, args.top)):
        rows = sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0]))
        print_table([title, "entries", "bytes"],
                    [[name, entries, size] for name, (entries, size) in rows[:most]])
        if most and len(rows) > most:
            print(f"... {len(rows) - most} more (--top N)")
        print()
    return 0


def _remote_stats(args) -> int:
    from kernel_cache import ENV_REMOTE
    from kernel_cache.remote_stats import remote_stats

    url = args.remote or os.environ.get(ENV_REMOTE)
    if not url:
        raise UsageError(f"no Redis URL: give one (--remote redis://host:6379/0) or set "
                         f"{ENV_REMOTE}")
    try:
        stats = remote_stats(url)
    except (ConnectionError, ImportError) as exc:
        raise UsageError(str(exc)) from exc
    if args.namespace:
        stats["namespaces"] = {digest: ns for digest, ns in stats["namespaces"].items()
                               if digest in args.namespace}
    if args.json:
        print(json.dumps(stats, indent=1, sort_keys=True))
        return 0
    server = stats["server"]
    print(f"remote cache {url}: redis {server['redis_version']}, memory "
          f"{human_bytes(server['used_memory'])} of "
          f"{human_bytes(server['maxmemory']) if server['maxmemory'] else 'no limit'} "
          f"({server['maxmemory_policy']}), keys evicted by the server {server['evicted_keys']}")
    rows = []
    for digest, ns in sorted(stats["namespaces"].items()):
        fields = ns["fields"] or {}
        asked = ns["hits"] + ns["misses"]
        rows.append([digest, fields.get("target_arch", "?"), fields.get("torch_version", "?"),
                     ns["keys"], human_bytes(ns["artifact_bytes"]), ns["hits"], ns["misses"],
                     f"{100 * ns['hits'] / asked:.0f}%" if asked else "-",
                     human_bytes(ns["bytes_read"]), human_bytes(ns["bytes_written"]),
                     ns["errors"], ns["evicted"]])
    print_table(["namespace", "arch", "torch", "keys", "stored", "hits", "misses", "hit rate",
                 "read", "written", "errors", "evicted"], rows)
    return 0


def cmd_export(args) -> int:
    try:
        counts = export_cache(args.dir, args.file, args.namespace)
    except OSError as exc:
        raise UsageError(f"cannot write {args.file}: {exc.strerror or exc}") from exc
    print(f"exported {counts['entries']} entries of {counts['namespaces']} namespaces "
          f"({counts['bytes']} artifact bytes) to {args.file}; skipped {counts['skipped']} broken")
    return 0


def cmd_import(args) -> int:
    """Exit status 1 when a namespace was refused or an artifact was corrupt."""
    accept = None
    if not args.no_check:
        from kernel_cache.environment import refusal_here

        accept = refusal_here
    if not os.path.isfile(args.file):
        raise UsageError(f"no archive {args.file}" + (" (a directory)" if os.path.isdir(
            args.file) else ""))
    try:
        counts = import_cache(args.dir, args.file, accept)
    except (tarfile.TarError, zlib.error, EOFError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.file} is not a kernel_cache archive ({exc})") from exc
    except OSError as exc:
        raise UsageError(f"cannot import {args.file}: {exc.strerror or exc}") from exc
    for digest, reason in counts["refused"].items():
        print(f"refused namespace {digest}: {reason}")
    print(f"imported {counts['imported']} entries into {args.dir} ({counts['already_present']} "
          f"already present, {counts['corrupt']} corrupt, {len(counts['refused'])} namespaces "
          "refused)")
    return 1 if counts["refused"] or counts["corrupt"] else 0


def cmd_list(args) -> int:
    rows = []
    for store in _stores(args):
        hits = store.hit_counts()
        for key, records in store.items():
            for record in records:
                rows.append(_list_row(store, key, record, hits.get(key, 0)))
        store.close()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for digest in sorted({row["namespace"] for row in rows}):
        print(_describe(args.dir, digest))
        print_table(["op", "signature", "size", "age", "hits"],
                    [[row["op"], row["signature"], human_bytes(row["size"]),
                      human_age(row["added"]), row["hits"]]
                     for row in rows if row["namespace"] == digest], indent="  ")
    if not rows:
        print(f"no entries in {args.dir}")
    else:
        kernels = sum(1 for row in rows if row["kernel"])
        others = len(rows) - kernels
        print(f"{kernels} kernels, {others} {'entry' if others == 1 else 'entries'} without one; hits: loads of the "
              "entry from this directory by a process (a kernel is loaded once per process, its "
              "calls after that are counted by eagerc.stats(), not here)")
    return 0


def _signature(key: bytes, metadata: dict) -> str:
    if "specialize_values" in metadata and "fallback" not in metadata:
        return ("no kernel: its kernels are specialized on the values of scalar arguments "
                "(each value its own entry)")
    return describe_signature(key, metadata)


def _list_row(store: DiskStore, key: bytes, record: dict, hits: int) -> dict:
    import time

    added = record.get("added")
    if added is None:  # written before records kept the time: the artifact's is close
        try:
            added = os.path.getmtime(store.artifact_path(record["sha256"]))
        except OSError:
            added = None
    metadata = record["metadata"]
    return {"namespace": store.digest, "kind": key.split(b"\0", 1)[0].decode(errors="replace"),
            "op": metadata.get("op") or "?", "signature": _signature(key, metadata),
            "kernel": not _no_kernel(metadata),
            "size": record["size"], "added": added,
            "age_s": None if added is None else round(time.time() - added, 1), "hits": hits,
            "variant_id": record["variant_id"], "key_hex": key.hex()}


def cmd_verify(args) -> int:
    """Exit status 1 when anything was wrong: broken entries (evicted, or left in place in a
    read-only cache), stray files removed, an index that could not be read, a broken or
    missing namespace.json."""
    totals = {"checked": 0, "ok": 0, "evicted": 0, "unusable": 0, "stray_files_removed": 0}
    problems = 0
    for store in _stores(args):
        result = store.verify()
        mode = " (read-only: broken entries stay, unused)" if result["read_only"] else ""
        print(f"{store.digest}{mode}: checked {result['checked']}, ok {result['ok']}, evicted "
              f"{result['evicted']}, broken left in place {result['unusable']}, stray files "
              f"removed {result['stray_files_removed']}")
        for problem in result["index_problems"] + [namespace_problem(args.dir, store.digest)]:
            if problem:
                print(f"{store.digest}: {problem}")
                problems += 1
        for name in totals:
            totals[name] += result[name]
        store.close()
    print(f"verified {totals['checked']} variants: {totals['ok']} ok, {totals['evicted']} "
          f"broken evicted, {totals['unusable']} broken left in place, "
          f"{totals['stray_files_removed']} stray files removed, {problems} other problems")
    found = totals["evicted"] + totals["unusable"] + totals["stray_files_removed"] + problems
    return 1 if found else 0


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


def _parser() -> argparse.ArgumentParser:
    summary, _, examples = __doc__.partition("\n")
    # Options shared by every command, accepted before or after it: the subcommand's copy
    # must not reset what was given before it, hence SUPPRESS as its default.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default=argparse.SUPPRESS,
                        help="cache directory (default: $EAGERC_CACHE_DIR or ~/.cache/eagerc)")
    parser = argparse.ArgumentParser(prog=PROG, description=summary, epilog=examples,
                                     parents=[common],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name, func, text):
        sub = commands.add_parser(name, help=text, parents=[common])
        sub.set_defaults(func=func)
        return sub

    def namespaces(sub):
        sub.add_argument("--namespace", action="append", metavar="DIGEST",
                         help="only this namespace (repeatable)")

    namespaces(command("info", cmd_info, "directory, namespaces, entry counts, bytes"))
    listing = command("list", cmd_list, "one line per kernel: op, signature, size, age, hits")
    namespaces(listing)
    listing.add_argument("--json", action="store_true", help="a JSON list, for scripts")
    namespaces(command("verify", cmd_verify, "check every artifact, evict broken ones"))
    namespaces(command("clear", cmd_clear, "delete every entry (of all namespaces by default)"))
    stats = command("stats", cmd_stats, "entries and bytes per target arch, kind and op")
    namespaces(stats)
    stats.add_argument("--top", type=int, default=30, help="ops to show (default 30)")
    stats.add_argument("--remote", nargs="?", const="", default=None, metavar="URL",
                       help="the Redis tier's counters over every host instead (default URL: "
                            "$EAGERC_REMOTE_CACHE)")
    stats.add_argument("--json", action="store_true", help="JSON, for scripts")
    export = command("export", cmd_export, "write the cache to one portable archive")
    export.add_argument("file")
    namespaces(export)
    imp = command("import", cmd_import, "add an archive's entries to this cache")
    imp.add_argument("file")
    imp.add_argument("--no-check", action="store_true",
                     help="skip the torch version and arch check (the entries may never load)")
    prune = command("prune", cmd_prune, "delete every namespace but the kept ones")
    prune.add_argument("--keep", action="append", metavar="DIGEST",
                       help="namespace to keep (repeatable; default: the most recently written)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.dir = os.path.abspath(os.path.expanduser(getattr(args, "dir", None)
                                                  or default_directory()))
    args.namespace = getattr(args, "namespace", None)
    args.remote_only = getattr(args, "remote", None) is not None  # stats --remote reads no directory
    try:
        if os.path.exists(args.dir) and not os.path.isdir(args.dir):
            raise UsageError(f"--dir {args.dir} is not a directory")
        if not os.path.exists(args.dir) and args.command != "import" and args.remote_only is False:
            raise UsageError(f"the cache directory {args.dir} does not exist (nothing was compiled "
                             "into it; the default is $EAGERC_CACHE_DIR, else ~/.cache/eagerc)")
        return args.func(args)
    except UsageError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... list | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
