"""tools/capture_longtail.py on three corpus files: probe, run in both modes, table."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "capture_longtail.py")
FILES = {"juho-lee/set_transformer": "modules.py", "tkipf/pygcn": "pygcn/models.py",
         "Jongchan/attention-module": "MODELS/cbam.py"}


def _present():
    corpus = os.path.join(ROOT, "tools", "longtail_corpus")
    return all(os.path.exists(os.path.join(corpus, r.replace("/", "__"), p))
               for r, p in FILES.items())


@pytest.mark.slow
@pytest.mark.skipif(not _present(), reason="corpus files not extracted "
                    "(python tools/capture_longtail.py extract needs the snapshots)")
def test_probe_run_table(tmp_path):
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    probe, rows = tmp_path / "probe.jsonl", tmp_path / "rows.jsonl"
    only = "set_transformer/modules.py,pygcn/models.py,attention-module/MODELS/cbam.py"
    subprocess.run([sys.executable, TOOL, "probe", "--rows", str(probe), "--only", only],
                   check=True, env=env, capture_output=True, timeout=600)
    found = [json.loads(line) for line in probe.read_text().splitlines()]
    built = {r["cls"] for r in found if "fail" not in r}
    assert {"MAB", "SAB", "ISAB", "PMA", "GCN", "CBAM"} <= built, found
    gcn = next(r for r in found if r["cls"] == "GCN")
    assert gcn["inputs"][1] == ["adj", 8]  # the manifest's inputs
    out = subprocess.run([sys.executable, TOOL, "run", "--probe", str(probe), "--rows", str(rows),
                          "--only", "SAB,GCN"], check=True, env=env, capture_output=True,
                         text=True, timeout=900).stdout
    got = [json.loads(line) for line in rows.read_text().splitlines()]
    assert {(r["cls"], r["mode"]) for r in got} == {
        ("SAB", "inference"), ("SAB", "training"), ("GCN", "inference"), ("GCN", "training")}
    for r in got:
        assert "skip" not in r, r
        assert r["capture_equal"] and r["dynamo_equal"], r
        assert isinstance(r["capture_strict"], bool)
    assert "| inference: whole-graph, one graph |" in out
    assert "| training: equal to eager |" in out
    # resume: nothing left to run, the same rows are tabled
    again = subprocess.run([sys.executable, TOOL, "run", "--probe", str(probe), "--rows",
                            str(rows), "--only", "SAB,GCN"], check=True, env=env,
                           capture_output=True, text=True, timeout=300)
    assert len(rows.read_text().splitlines()) == len(got)
    assert again.stdout == out
