"""ReadOnlyIndex: the index of a cache directory this process cannot write.

A pre-warmed cache mounted read-only is a normal deployment (a container image, a shared
NFS export). diskcache cannot open it: its constructor creates tables and writes settings.
This reads the same sqlite table directly, through diskcache's own ``Disk`` for the
encoding of keys and values, so the two always agree on the format. Only what
DiskStore reads is offered (``get``, ``iterkeys``); every write raises
``OSError(EROFS)``, which DiskStore's callers already treat as "not stored".
"""
from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import urllib.parse

import diskcache


class ReadOnlyIndex:
    def __init__(self, index_dir: str, min_file_size: int):
        self.directory = index_dir
        path = os.path.join(index_dir, "cache.db")
        self._lock = threading.Lock()
        self._disk = diskcache.Disk(index_dir, min_file_size=min_file_size)
        self._db = None
        if os.path.exists(path):
            uri = "file:" + urllib.parse.quote(path)
            try:
                # mode=ro still needs the WAL's shared-memory file; a read-only mount has
                # none, and nobody writes there, so immutable is then exact.
                self._db = sqlite3.connect(uri + "?mode=ro", uri=True, check_same_thread=False)
                self._db.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                self._db = sqlite3.connect(uri + "?immutable=1", uri=True, check_same_thread=False)
                self._db.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()

    def get(self, key, default=None):
        if self._db is None:
            return default
        db_key, raw = self._disk.put(key)
        with self._lock:
            row = self._db.execute("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = ?",
                                   (db_key, raw)).fetchone()
        if row is None:
            return default
        mode, filename, value = row
        return self._disk.fetch(mode, filename, value, False)

    def iterkeys(self):
        if self._db is None:
            return
        with self._lock:
            rows = self._db.execute("SELECT key, raw FROM Cache ORDER BY rowid").fetchall()
        for db_key, raw in rows:
            yield self._disk.get(db_key, raw)

    def _refuse(self, *args, **kwargs):
        raise OSError(errno.EROFS, "the kernel cache is read-only", self.directory)

    set = delete = clear = _refuse

    @contextlib.contextmanager
    def transact(self, retry=False):
        self._refuse()
        yield

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
