"""Tests of kernel_cache: the persistent store of compiled kernels (no torch needed)."""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import kernel_cache
from kernel_cache import DiskStore, Entry, Namespace, RedisStore, TieredStore, open_store
from kernel_cache.layout import list_namespaces

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGGER = "eagerc.kernel_cache"
NS = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
               target_arch="cpu-avx512", compiler_settings="3f2a9c01")
KEY = b"aten::add.Tensor|f32,f32|rank2|contiguous"
ARTIFACT = bytes(range(256)) * 400  # 100 KiB, the size of a typical per-op kernel


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    # No test may touch the user's real cache or a configured remote server.
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("EAGERC_REMOTE_CACHE", raising=False)


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "cache")


@pytest.fixture
def store(cache_dir):
    with DiskStore(cache_dir, namespace=NS) as s:
        yield s


def read(path):
    with open(path, "rb") as f:
        return f.read()


def run_python(code, cache_dir=None, *args):
    env = dict(os.environ, PYTHONPATH=REPO)
    if cache_dir:
        env["EAGERC_CACHE_DIR"] = cache_dir
    return subprocess.run([sys.executable, *args] if not code else
                          [sys.executable, "-c", textwrap.dedent(code), *args],
                          env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def cli(cache_dir, *args, returncode=0):
    result = run_python(None, cache_dir, "-m", "kernel_cache", "--dir", cache_dir, *args)
    assert result.returncode == returncode, (result.stdout, result.stderr)
    return result.stdout


# -- namespace ---------------------------------------------------------------------------------

def test_namespace_digest_is_stable_and_short():
    assert NS.digest() == Namespace.from_dict(NS.to_dict()).digest()
    assert len(NS.digest()) == 16 and int(NS.digest(), 16) >= 0


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Namespace)])
def test_namespace_change_hides_entries(store, cache_dir, field):
    store.add(KEY, ARTIFACT, {})
    bumped = dataclasses.replace(NS, **{field: 2 if field == "format_version" else "new"})
    assert bumped.digest() != NS.digest()
    assert DiskStore(cache_dir, namespace=bumped).get(KEY) == []
    assert len(DiskStore(cache_dir, namespace=NS).get(KEY)) == 1  # the old one is untouched


# -- basic behaviour ---------------------------------------------------------------------------

def test_same_key(store, cache_dir):
    entry = store.add(KEY, ARTIFACT, {"guards": ["s0 > 1"]})
    assert store.get(KEY) == [entry]
    assert read(entry.artifact_path) == ARTIFACT
    assert entry.metadata == {"guards": ["s0 > 1"]}
    # A fresh store object on the same directory finds it too (persistence, not memory).
    assert DiskStore(cache_dir, namespace=NS).get(KEY) == [entry]


def test_different_key(store):
    store.add(KEY, ARTIFACT, {})
    assert store.get(KEY + b"|f64") == []
    assert store.stats()["misses"] == 1


def test_add_same_variant_twice_keeps_one(store):
    first = store.add(KEY, ARTIFACT, {"g": 1})
    assert store.add(KEY, ARTIFACT, {"g": 1}) == first
    assert store.get(KEY) == [first]


def test_several_variants_under_one_key(store):
    a = store.add(KEY, b"kernel for contiguous", {"guards": ["contiguous"]})
    b = store.add(KEY, b"kernel for strided", {"guards": ["strided"]})
    c = store.add(KEY, b"kernel for contiguous", {"guards": ["aligned"]})  # same bytes, new guard
    assert [e.variant_id for e in store.get(KEY)] == [a.variant_id, b.variant_id, c.variant_id]
    assert a.artifact_path == c.artifact_path  # stored once, by content
    store.evict(KEY, a.variant_id)
    assert store.get(KEY) == [b, c]
    assert read(c.artifact_path) == b"kernel for contiguous"  # still used by c
    store.evict(KEY, c.variant_id)
    assert not os.path.exists(c.artifact_path)  # last reference gone
    assert store.get(KEY) == [b]


def test_stats_and_clear(store):
    store.add(KEY, ARTIFACT, {})
    store.add(b"other", b"x" * 10, {})
    store.get(KEY)
    stats = store.stats()
    assert (stats["keys"], stats["variants"], stats["hits"], stats["adds"]) == (2, 2, 1, 2)
    assert stats["artifact_bytes"] == len(ARTIFACT) + 10
    store.clear()
    assert store.get(KEY) == [] and os.listdir(store.artifact_dir) == []
    assert store.stats()["keys"] == 0


def test_bad_arguments_say_what_is_wrong(store):
    with pytest.raises(TypeError, match="must be bytes"):
        store.get("aten::add")
    with pytest.raises(TypeError, match="JSON-serializable"):
        store.add(KEY, ARTIFACT, {"guard": object()})


def test_cache_dir_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "from-env"))
    entry = open_store(NS).add(KEY, ARTIFACT, {})
    expected = tmp_path / "from-env" / NS.digest() / "artifacts"
    assert os.path.dirname(entry.artifact_path) == str(expected)
    assert DiskStore(namespace=NS).directory == str(tmp_path / "from-env")


def test_imports_nothing_from_eagerc():
    result = run_python("""
        import sys, kernel_cache, kernel_cache.__main__
        print(sorted(m for m in sys.modules if m == "eagerc" or m.startswith("eagerc.")))
        print("redis" in sys.modules)
    """)
    assert result.stdout.split("\n")[:2] == ["[]", "False"], result.stderr  # redis is lazy


# -- processes ---------------------------------------------------------------------------------

def test_second_process_sees_entries(store, cache_dir):
    entry = store.add(KEY, ARTIFACT, {"guards": ["g"]})
    result = run_python(f"""
        import hashlib
        from kernel_cache import DiskStore, Namespace
        [entry] = DiskStore(namespace=Namespace(**{NS.to_dict()!r})).get({KEY!r})
        print(entry.variant_id, hashlib.sha256(open(entry.artifact_path, "rb").read()).hexdigest())
        DiskStore(namespace=Namespace(**{NS.to_dict()!r})).add(b"from child", b"child", {{}})
    """, cache_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [entry.variant_id, hashlib.sha256(ARTIFACT).hexdigest()]
    [child] = store.get(b"from child")
    assert read(child.artifact_path) == b"child"


def test_concurrent_adds_from_two_processes_keep_both(cache_dir):
    code = f"""
        import sys
        from kernel_cache import DiskStore, Namespace
        store = DiskStore(namespace=Namespace(**{NS.to_dict()!r}))
        for i in range(25):
            store.add({KEY!r}, f"{{sys.argv[1]}} {{i}}".encode(), {{"writer": sys.argv[1]}})
    """
    env = dict(os.environ, PYTHONPATH=REPO, EAGERC_CACHE_DIR=cache_dir)
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), name], env=env)
               for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    entries = DiskStore(cache_dir, namespace=NS).get(KEY)
    assert sorted(read(e.artifact_path) for e in entries) == sorted(
        f"{name} {i}".encode() for name in "ab" for i in range(25))


# -- broken entries ----------------------------------------------------------------------------

def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(1000)


def _garbage(path):
    with open(path, "wb") as f:
        f.write(os.urandom(len(ARTIFACT)))  # same size: only the hash can tell


@pytest.mark.parametrize("damage, why", [(_truncate, "truncated"), (_garbage, "sha256"),
                                         (os.unlink, "missing")])
def test_broken_artifact_is_evicted_and_rebuilt(store, caplog, damage, why):
    good = store.add(b"neighbour", b"fine", {})
    entry = store.add(KEY, ARTIFACT, {})
    damage(entry.artifact_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert store.get(KEY) == []
        assert store.get(KEY) == []  # evicted: the second look is a plain miss
    [record] = caplog.records
    assert record.name == LOGGER and record.levelno == logging.WARNING
    message = record.getMessage()
    # The key as people read it (its text fields), not as hex.
    assert message.startswith(f"broken cache entry {KEY.decode()}#")
    assert f" variant {entry.variant_id}: " in message
    assert why in message and message.endswith("; evicted; it will be rebuilt")
    assert store.get(b"neighbour") == [good]
    assert store.add(KEY, ARTIFACT, {}) == entry
    assert store.get(KEY) == [entry] and read(entry.artifact_path) == ARTIFACT


def test_corrupt_index_is_treated_as_empty(store, cache_dir, caplog):
    store.add(KEY, ARTIFACT, {})
    store.close()
    with open(os.path.join(cache_dir, NS.digest(), "index", "cache.db"), "wb") as f:
        f.write(b"this is not sqlite" * 100)
    fresh = DiskStore(cache_dir, namespace=NS)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert fresh.get(KEY) == []
    assert len(caplog.records) == 1 and "corrupt" in caplog.records[0].getMessage()
    entry = fresh.add(KEY, ARTIFACT, {})
    assert DiskStore(cache_dir, namespace=NS).get(KEY) == [entry]


def test_folder_deleted_under_a_running_process(store, caplog):
    store.add(KEY, ARTIFACT, {})
    shutil.rmtree(store.root)  # e.g. `python -m kernel_cache prune` from another shell
    assert store.get(KEY) == []
    entry = store.add(KEY, ARTIFACT, {})
    assert read(entry.artifact_path) == ARTIFACT
    assert DiskStore(store.directory, namespace=NS).get(KEY) == [entry]
    assert not caplog.records  # a vanished folder is a plain miss, not a broken entry


def test_atomic_write_leaves_no_partial_file(store, monkeypatch):
    store.get(KEY)  # open the index first, so only the artifact write fails

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        store.add(KEY, ARTIFACT, {})
    monkeypatch.undo()
    assert os.listdir(store.artifact_dir) == []
    assert store.get(KEY) == []
    assert read(store.add(KEY, ARTIFACT, {}).artifact_path) == ARTIFACT


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_info_verify_clear(store, cache_dir):
    store.add(KEY, ARTIFACT, {"guards": []})
    store.add(KEY, b"second", {"guards": ["x"]})
    broken = store.add(b"broken", b"will be truncated", {})
    _truncate(broken.artifact_path)
    with open(os.path.join(store.artifact_dir, ".tmp-crash.part"), "wb") as f:
        f.write(b"left by a crash")
    os.utime(os.path.join(store.artifact_dir, ".tmp-crash.part"), (0, 0))

    info = cli(cache_dir, "info")
    assert f"cache directory: {cache_dir}" in info
    assert f"namespace {NS.digest()}: torch 2.13.0, eagerc 0.1.0, cpu-avx512" in info
    assert "keys 2, variants 3" in info

    listing = cli(cache_dir, "list")
    assert "broken#" in listing and KEY.decode() in listing

    verify = cli(cache_dir, "verify", returncode=1)  # it found something
    assert ("verified 3 variants: 2 ok, 1 broken evicted, 0 broken left in place, 1 stray files "
            "removed, 0 other problems") in verify
    assert "0 broken evicted" in cli(cache_dir, "verify")  # nothing left to find: status 0
    assert store.get(b"broken") == [] and len(store.get(KEY)) == 2
    assert sorted(os.listdir(store.artifact_dir)) == sorted(
        os.path.basename(e.artifact_path) for e in store.get(KEY))

    assert "cleared 1 namespaces" in cli(cache_dir, "clear")
    assert store.get(KEY) == [] and os.listdir(store.artifact_dir) == []
    assert "total: 1 namespaces, 0 keys, 0 variants, 0 bytes" in cli(cache_dir, "info")


def test_cli_prune_keeps_newest_or_given(cache_dir):
    old, new, other = (dataclasses.replace(NS, torch_version=v) for v in ("2.11", "2.13", "2.12"))
    for ns in (old, new, other):
        DiskStore(cache_dir, namespace=ns).add(KEY, ARTIFACT, {})
    for age, ns in ((3000, old), (2000, other)):  # make `new` clearly the most recent
        root = os.path.join(cache_dir, ns.digest())
        for path in [root] + [os.path.join(root, "index", n) for n in os.listdir(
                os.path.join(root, "index"))]:
            os.utime(path, (time.time() - age, time.time() - age))
    assert "pruned 1 namespaces" in cli(cache_dir, "prune", "--keep", new.digest(), "--keep",
                                        other.digest())
    assert sorted(list_namespaces(cache_dir)) == sorted([new.digest(), other.digest()])
    assert "pruned 1 namespaces, kept " + new.digest() in cli(cache_dir, "prune")
    assert list_namespaces(cache_dir) == [new.digest()]
    assert len(DiskStore(cache_dir, namespace=new).get(KEY)) == 1


# -- tiers and Redis ---------------------------------------------------------------------------

def test_tiered_store_backfills_earlier_tiers(tmp_path):
    near = DiskStore(str(tmp_path / "near"), namespace=NS)
    far = DiskStore(str(tmp_path / "far"), namespace=NS)
    tiers = TieredStore([near, far])
    remote_only = far.add(KEY, ARTIFACT, {"g": 1})
    [hit] = tiers.get(KEY)
    assert hit.variant_id == remote_only.variant_id
    assert hit.artifact_path.startswith(near.directory) and read(hit.artifact_path) == ARTIFACT
    assert near.get(KEY) == [hit]  # back-filled
    both = tiers.add(b"new", b"code", {})
    assert near.get(b"new") == [both] and [e.variant_id for e in far.get(b"new")] == [
        both.variant_id]


def test_public_api():
    assert sorted(kernel_cache.__all__) == sorted(
        ["Namespace", "Entry", "KernelStore", "DiskStore", "RedisStore", "TieredStore",
         "open_store"])


def test_read_only_index_reads_what_diskcache_wrote(store):
    """A cache this process cannot write is read through ReadOnlyIndex (the read-only
    mount itself is exercised end to end in tests/test_reliability.py)."""
    from kernel_cache.readonly import ReadOnlyIndex

    first = store.add(KEY, ARTIFACT, {"g": 1})
    store.add(b"other", b"code", {})
    store.close()
    index = ReadOnlyIndex(store._index_dir, min_file_size=1 << 24)
    assert sorted(index.iterkeys()) == sorted([KEY, b"other"])
    assert first.variant_id in index.get(KEY) and index.get(b"absent") is None
    with pytest.raises(OSError, match="read-only"):
        index.set(KEY, "[]")
    index.close()
    assert ReadOnlyIndex(str(store.root) + "/no-index", 1 << 24).get(KEY) is None


def test_keys_are_logged_as_people_read_them():
    from kernel_cache.records import describe_key

    text = describe_key(b"op\0eagerc\0aten::add.Tensor\0T\x06\x0b\x00\x02")
    assert text.startswith("op|eagerc|aten::add.Tensor|…#") and len(text.split("#")[1]) == 8
    assert describe_key(KEY).startswith(KEY.decode() + "#")


def test_tiered_add_reaches_later_tiers_when_the_first_cannot_take_it(tmp_path, monkeypatch,
                                                                     caplog):
    near = DiskStore(str(tmp_path / "near"), namespace=NS)
    far = DiskStore(str(tmp_path / "far"), namespace=NS)

    def full(key, artifact, metadata):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(near, "add", full)
    tiers = TieredStore([near, far])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(3):
            entry = tiers.add(b"k%d" % i, ARTIFACT, {})
            assert entry.artifact_path.startswith(str(tmp_path / "far"))  # shared all the same
    assert caplog.text.count("No space left on device") == 1  # once, not per add
    monkeypatch.setattr(far, "add", full)
    with pytest.raises(OSError, match="No space left"):  # no tier took it: the caller knows
        tiers.add(b"k9", ARTIFACT, {})


def test_a_lookup_before_anything_is_stored_makes_no_index(store, cache_dir):
    # A fresh cache's first run looks up every kernel it misses: before the first add,
    # each lookup is a stat, and the index (about 10 ms to make) is the first add's.
    index = os.path.join(cache_dir, NS.digest(), "index")
    assert store.get(KEY) == [] and not os.path.exists(index)
    assert store.counters["misses"] == 1
    # Another process (the compile service's worker) stores it: the next lookup finds it.
    with DiskStore(cache_dir, namespace=NS) as other:
        other.add(KEY, ARTIFACT, {"op": "add"})
    (entry,) = store.get(KEY)
    assert read(entry.artifact_path) == ARTIFACT


def test_lookups_before_anything_is_stored_import_no_index_modules(cache_dir):
    # diskcache and sqlite3 serve the index: a first run whose lookups find none (its
    # kernels compiled by the compile service) does not import them.
    result = run_python("""
        import sys
        from kernel_cache import DiskStore, Namespace
        store = DiskStore(sys.argv[1], namespace=Namespace(1, "2.13", "0.1", "cpu", "0"))
        assert store.get(b"k") == []
        print(sorted({"diskcache", "sqlite3"} & set(sys.modules)))
        store.add(b"k", b"artifact", {})
        print(len(store.get(b"k")), sorted({"diskcache", "sqlite3"} & set(sys.modules)))
    """, None, cache_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "1 ['diskcache', 'sqlite3']"], result.stdout
