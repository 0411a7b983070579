"""`python -m kernel_cache` and a cache shared between users: file modes, verify's exit
status, a broken namespace.json, orphans after an index rebuild, readable tables."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from kernel_cache import DiskStore, Namespace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
               target_arch="cpu-avx512", compiler_settings="3f2a9c01")
LONG_OP = "aten::_scaled_dot_product_flash_attention_for_cpu_backward.default"  # 66 characters
KEY = b"op\0cpu\0aten::add.Tensor\0\x06\x0b\x00"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("EAGERC_REMOTE_CACHE", raising=False)


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "cache")


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "kernel_cache", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=dict(os.environ, PYTHONPATH=REPO))


def _warm(cache_dir):
    store = DiskStore(cache_dir, namespace=NS)
    store.add(KEY, b"x" * 5000, {"op": "aten::add.Tensor",
                                 "signature": "aten::add.Tensor(float32[s,s] C, other=int)"})
    store.add(b"op\0cpu\0" + LONG_OP.encode() + b"\0sig", b"y" * 300,
              {"op": LONG_OP, "signature": LONG_OP + "(float32[2,4,8,16] C)"})
    store.add(b"op\0cpu\0aten::nonzero\0sig", b"", {"op": "aten::nonzero",
                                                   "fallback": "data-dependent output size"})
    return store


# -- a cache other users can read --------------------------------------------------------------

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_artifacts_follow_the_umask(tmp_path, umask, mode):
    code = textwrap.dedent(f"""
        import os
        os.umask({umask})
        from kernel_cache import DiskStore, Namespace
        store = DiskStore({str(tmp_path / 'c')!r}, namespace=Namespace(1, "2", "0", "cpu", "0"))
        e = store.add(b"k", b"code", {{}})
        index = os.path.join(store.root, "index")
        for path in (e.artifact_path, os.path.join(store.root, "namespace.json"),
                     os.path.join(index, "cache.db"), index):
            print(oct(os.stat(path).st_mode & 0o777))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=REPO), cwd=REPO)
    folder = mode | (mode & 0o444) >> 2  # searchable by whoever may read
    assert done.stdout.split() == [oct(mode)] * 3 + [oct(folder)], done.stderr


def test_another_user_can_read_the_cache(monkeypatch):
    """Run as nobody: the artifact and the index (what a reading process opens) are readable.
    (A process that cannot write the folder reads the index read-only: ReadOnlyIndex.)"""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to read as another user (nobody)")
    shared = tempfile.mkdtemp(prefix="eagerc-shared-")
    try:
        os.chmod(shared, 0o755)  # like a cache directory under a home or /opt
        store = DiskStore(shared, namespace=NS)
        entry = store.add(KEY, b"kernel bytes", {"op": "aten::add"})
        store.close()
        for path in (entry.artifact_path, os.path.join(store.root, "index", "cache.db"),
                     os.path.join(store.root, "namespace.json")):
            done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                                   "--clear-groups", "head", "-c", "12", path],
                                  capture_output=True, cwd="/")
            assert done.returncode == 0, (path, done.stderr)
            assert done.stdout == read_head(path)
    finally:
        shutil.rmtree(shared)


def read_head(path):
    with open(path, "rb") as f:
        return f.read(12)


# -- verify says when it found something ------------------------------------------------------

def test_verify_exits_1_when_it_removed_something(cache_dir):
    store = _warm(cache_dir)
    assert cli("verify", "--dir", cache_dir).returncode == 0  # all well
    with open(os.path.join(store.artifact_dir, "0" * 64 + ".so"), "wb") as f:
        f.write(b"an artifact no record names")
    os.utime(os.path.join(store.artifact_dir, "0" * 64 + ".so"), (0, 0))
    done = cli("verify", "--dir", cache_dir)
    assert done.returncode == 1 and "1 stray files removed" in done.stdout
    assert cli("verify", "--dir", cache_dir).returncode == 0  # nothing left to find


def test_verify_exits_1_when_the_index_is_unreadable(cache_dir):
    store = _warm(cache_dir)
    store.close()
    with open(os.path.join(store.root, "index", "cache.db"), "wb") as f:
        f.write(b"this is not sqlite" * 100)
    done = cli("verify", "--dir", cache_dir)
    assert done.returncode == 1, done.stdout
    assert "corrupt index replaced by an empty one" in done.stdout


def test_a_garbage_namespace_json_is_broken_not_missing(cache_dir):
    store = _warm(cache_dir)
    path = os.path.join(store.root, "namespace.json")
    with open(path, "w") as f:
        f.write("{ not json")
    info = cli("info", "--dir", cache_dir)
    assert f"namespace {NS.digest()} (namespace.json is broken (JSONDecodeError" in info.stdout
    verify = cli("verify", "--dir", cache_dir)
    assert verify.returncode == 1 and "namespace.json is broken" in verify.stdout
    os.unlink(path)
    assert "(no namespace.json)" in cli("info", "--dir", cache_dir).stdout
    DiskStore(cache_dir, namespace=NS).get(KEY)  # a store that knows the fields rewrites it
    assert cli("verify", "--dir", cache_dir).returncode == 0


def test_orphans_are_swept_when_the_index_is_rebuilt(cache_dir, caplog):
    store = _warm(cache_dir)
    store.close()
    for name in os.listdir(store.artifact_dir):  # older than an in-flight add could be
        os.utime(os.path.join(store.artifact_dir, name), (0, 0))
    with open(os.path.join(store.root, "index", "cache.db"), "wb") as f:
        f.write(b"garbage" * 100)
    with caplog.at_level(logging.WARNING, logger="eagerc.kernel_cache"):
        assert DiskStore(cache_dir, namespace=NS).get(KEY) == []
    assert os.listdir(store.artifact_dir) == []
    assert "removed 3 artifacts the replaced index" in caplog.text


# -- the CLI reads well ---------------------------------------------------------------------

@pytest.mark.parametrize("archive", ["missing.tgz", "garbage.tgz", "empty.tgz", "a-dir"])
def test_import_of_a_bad_archive_is_one_line_exit_2(tmp_path, archive):
    (tmp_path / "garbage.tgz").write_bytes(b"not an archive")
    (tmp_path / "empty.tgz").write_bytes(b"")
    (tmp_path / "a-dir").mkdir()
    done = cli("import", str(tmp_path / archive), "--dir", str(tmp_path / "c"))
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("python -m kernel_cache import: error: ")


def test_options_go_before_or_after_the_command(cache_dir, tmp_path):
    _warm(cache_dir)
    before = cli("--dir", cache_dir, "info").stdout
    assert cli("info", "--dir", cache_dir).stdout == before and "keys 3" in before
    done = cli("info", "--namespace", "0123456789abcdef", "--dir", cache_dir)
    assert done.returncode == 2 and "no namespace 0123456789abcdef" in done.stderr
    (tmp_path / "file").write_text("")
    done = cli("info", "--dir", str(tmp_path / "file"))
    assert done.returncode == 2 and "is not a directory" in done.stderr


def test_list_is_a_table_and_json_for_scripts(cache_dir):
    store = _warm(cache_dir)
    store.get(KEY)
    store.get(KEY)
    text = cli("list", "--dir", cache_dir).stdout
    lines = text.splitlines()
    assert lines[1].split() == ["op", "signature", "size", "age", "hits"]
    [add] = [line for line in lines if line.lstrip().startswith("aten::add.Tensor")]
    assert "float32[s,s] C, other=int" in add and "4.9 KiB" in add and add.split()[-1] == "2"
    assert any("no kernel: data-dependent output size" in line for line in lines)
    assert not any("\\x" in line or "b'" in line for line in lines)  # no raw key bytes
    rows = json.loads(cli("list", "--json", "--dir", cache_dir).stdout)
    by_op = {row["op"]: row for row in rows}
    assert by_op["aten::add.Tensor"]["hits"] == 2 and by_op["aten::add.Tensor"]["size"] == 5000
    assert by_op[LONG_OP]["signature"] == "float32[2,4,8,16] C"
    assert bytes.fromhex(by_op["aten::add.Tensor"]["key_hex"]) == KEY
    assert 0 <= by_op["aten::nonzero"]["age_s"] < 600


def test_stats_fits_any_op_name(cache_dir):
    _warm(cache_dir)
    text = cli("stats", "--dir", cache_dir).stdout
    [row] = [line for line in text.splitlines() if line.startswith(LONG_OP)]
    assert row.split() == [LONG_OP, "1", "300"]
    stats = json.loads(cli("stats", "--json", "--dir", cache_dir).stdout)
    assert stats["op"][LONG_OP] == {"entries": 1, "bytes": 300}
    assert stats["kind"]["op"]["entries"] == 3
