"""tests/conftest.py keeps a test run away from the user's kernel cache: a run with the
user's $EAGERC_CACHE_DIR and $EAGERC_REMOTE_CACHE set writes nothing there."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.slow
def test_a_test_run_leaves_the_users_cache_alone(tmp_path):
    for helper in ("conftest.py", "default_share.py"):
        shutil.copy(HERE / helper, tmp_path / helper)
    (tmp_path / "test_compiles.py").write_text(textwrap.dedent("""
        import os
        import torch, eagerc

        def test_compiles_a_kernel():
            eagerc.enable("cpu", ops=["aten::abs"])
            try:
                torch.abs(torch.randn(5))
            finally:
                eagerc.disable("cpu")
            assert eagerc.stats()["compiles"] + eagerc.stats()["disk_loads"] == 1
            assert "EAGERC_REMOTE_CACHE" not in os.environ
            print("cache:", os.environ["EAGERC_CACHE_DIR"])
    """))
    users = tmp_path / "users-cache"
    env = {**os.environ, "EAGERC_CACHE_DIR": str(users), "EAGERC_REMOTE_CACHE": "redis://127.0.0.1:1/0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
    assert not users.exists() or not any(users.iterdir()), sorted(p.name for p in users.rglob("*"))
