"""What a Redis tier holds and how it served, over every host that used it.

Each RedisStore adds its counters (hits, misses, adds, bytes read and written, errors,
evicted) to a hash on the server, ``eagerc:<namespace>:stats``, so the numbers cover the
whole fleet, not one process. ``python -m kernel_cache stats --remote`` prints them with
what each namespace holds and the server's memory and eviction figures.

    >>> from kernel_cache.remote_stats import COUNTERS
    >>> COUNTERS[:3]
    ('hits', 'misses', 'adds')
"""
from __future__ import annotations

import json

from kernel_cache.remote import connect

COUNTERS = ("hits", "misses", "adds", "bytes_read", "bytes_written", "errors", "evicted")
# What the server says about memory and eviction (INFO); the rest of INFO is not ours.
SERVER_FIELDS = ("redis_version", "used_memory", "maxmemory", "maxmemory_policy", "evicted_keys",
                 "uptime_in_seconds")


def remote_stats(url: str, prefix: str = "eagerc", timeout: float = 10.0) -> dict:
    """Per namespace: its fields, keys, artifacts, artifact bytes and the counters; and the
    server's memory figures. Raises ConnectionError (with how to fix it) when the server
    does not answer, ImportError without the redis package."""
    import redis

    client = connect(url, timeout)
    try:
        names = [name.decode(errors="replace") for name in
                 client.scan_iter(match=f"{prefix}:*", count=1000)]
        namespaces: dict = {}

        def section(digest):
            return namespaces.setdefault(digest, {"fields": None, "keys": 0, "artifacts": 0,
                                                  "artifact_bytes": 0,
                                                  **{name: 0 for name in COUNTERS}})

        artifacts = []
        for name in names:
            parts = name.split(":")
            if len(parts) < 3:
                continue
            digest, kind = parts[1], parts[2]
            if kind == "k":
                section(digest)["keys"] += 1
            elif kind == "a":
                artifacts.append((digest, name))
            elif kind == "stats":
                for field, value in client.hgetall(name).items():
                    if field.decode() in COUNTERS:
                        section(digest)[field.decode()] = int(value)
            elif kind == "namespace":
                try:
                    section(digest)["fields"] = json.loads(client.get(name) or b"null")
                except ValueError:
                    section(digest)["fields"] = None
        pipe = client.pipeline(transaction=False)
        for _, name in artifacts:
            pipe.strlen(name)
        for (digest, _), size in zip(artifacts, pipe.execute() if artifacts else []):
            section(digest)["artifacts"] += 1
            section(digest)["artifact_bytes"] += size
        info = {**client.info("server"), **client.info("memory"), **client.info("stats")}
    except redis.exceptions.RedisError as exc:
        raise ConnectionError(f"cannot read the Redis cache server at {url} ({exc}). Fix: "
                              "start the server, correct the URL (--remote URL or "
                              "EAGERC_REMOTE_CACHE), or raise EAGERC_REMOTE_TIMEOUT.") from exc
    finally:
        client.close()
    return {"url": url, "server": {name: info.get(name) for name in SERVER_FIELDS},
            "namespaces": namespaces}
