"""A warmed cache shipped as one file (`python -m kernel_cache export/import/stats`).

Real kernels: compiled by eagerc here, exported, imported into an empty cache directory,
then a new process on that directory runs them with zero compiles. Namespaces this
machine cannot use (another torch, another arch) are refused with the reason, and a
corrupt artifact in the archive is never written.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap

import pytest
import torch

import eagerc
from kernel_cache.__main__ import main as cache_cli
from kernel_cache.archive import export_cache, import_cache
from kernel_cache.environment import refusal_here

NEW_PROCESS = textwrap.dedent("""
    import torch, eagerc
    x, y = torch.randn(9, 7), torch.randn(9, 7)
    with eagerc.enabled("cpu", ops=["aten::abs", "aten::add.Tensor"]):
        a, b = torch.abs(x), x + y
    assert torch.equal(a, x.abs()) and torch.allclose(b, x + y)
    s = eagerc.stats()
    print("COMPILES", s["compiles"], "LOADS", sum(v.get("disk_loads", 0) for v in s["ops"].values()))
""")


@pytest.fixture
def warmed(fresh_cache):
    with eagerc.enabled("cpu", ops=["aten::abs", "aten::add.Tensor"]):
        torch.abs(torch.randn(4, 5)), torch.randn(3, 3) + torch.randn(3, 3)
    assert eagerc.stats()["compiles"] == 2
    return fresh_cache


@pytest.mark.slow
def test_export_import_runs_in_a_new_process_without_compiling(warmed, tmp_path, capsys):
    archive = tmp_path / "kernels.tar.gz"
    assert cache_cli(["--dir", str(warmed), "export", str(archive)]) == 0
    assert "exported 2 entries" in capsys.readouterr().out
    target = tmp_path / "elsewhere"
    assert cache_cli(["--dir", str(target), "import", str(archive)]) == 0
    assert "imported 2 entries" in capsys.readouterr().out
    env = dict(os.environ, EAGERC_CACHE_DIR=str(target))
    done = subprocess.run([sys.executable, "-c", NEW_PROCESS], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "COMPILES 0 LOADS 2" in done.stdout, done.stdout
    # Importing again adds nothing new.
    assert import_cache(str(target), str(archive), refusal_here)["already_present"] == 2


def test_stats_per_arch_kind_and_op(warmed, capsys):
    assert cache_cli(["--dir", str(warmed), "stats"]) == 0
    out = capsys.readouterr().out
    from kernel_cache.environment import cpu_arch

    assert f"{cpu_arch()}" in out
    assert "aten::abs" in out and "aten::add.Tensor" in out
    kinds = [line.split() for line in out.splitlines() if line.startswith("op ")]
    assert kinds and kinds[0][1] == "2"  # two op entries


def _rewrite_manifest(archive, out, edit):
    with tarfile.open(archive, "r:gz") as src, tarfile.open(out, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name == "manifest.json":
                manifest = json.loads(data)
                edit(manifest)
                data = json.dumps(manifest).encode()
            elif member.name.startswith("artifacts/") and edit.__name__ == "corrupt":
                data = data[:-1] + bytes([data[-1] ^ 1])
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))


def test_other_torch_is_refused_with_the_reason(warmed, tmp_path, capsys):
    archive, foreign = tmp_path / "a.tar.gz", tmp_path / "foreign.tar.gz"
    export_cache(str(warmed), str(archive))
    from kernel_cache import Namespace

    def other_torch(manifest):
        sections = {}
        for section in manifest["namespaces"].values():
            section["fields"]["torch_version"] = "1.0.0"
            sections[Namespace.from_dict(section["fields"]).digest()] = section
        manifest["namespaces"] = sections

    _rewrite_manifest(archive, foreign, other_torch)
    target = tmp_path / "elsewhere"
    assert cache_cli(["--dir", str(target), "import", str(foreign)]) == 1
    out = capsys.readouterr().out
    assert "refused namespace" in out and "built with torch 1.0.0" in out
    assert "imported 0 entries" in out
    assert not list(target.rglob("*.so"))


def test_corrupt_artifact_is_not_written(warmed, tmp_path):
    archive, bad = tmp_path / "a.tar.gz", tmp_path / "bad.tar.gz"
    export_cache(str(warmed), str(archive))

    def corrupt(manifest):
        pass

    _rewrite_manifest(archive, bad, corrupt)
    counts = import_cache(str(tmp_path / "elsewhere"), str(bad), refusal_here)
    assert counts["corrupt"] == 2 and counts["imported"] == 0
