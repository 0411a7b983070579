"""Runs a script in a fresh process with the eagerc device on GPU memory
(EAGERC_BACKING=cuda is read when eagerc is imported, so every GPU-memory test starts one)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

TESTS = os.path.dirname(os.path.abspath(__file__))


def run_on_gpu_device(script: str, cache, prelude: str = "") -> str:
    """Runs `prelude` then the dedented `script` with the device on GPU memory and its kernel
    cache in `cache`; fails with the process's output unless it exits 0; returns stdout."""
    env = dict(os.environ, EAGERC_BACKING="cuda", EAGERC_CACHE_DIR=str(cache),
               PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    path = f"import sys; sys.path.insert(0, {TESTS!r})\n"
    done = subprocess.run([sys.executable, "-c", path + prelude + textwrap.dedent(script)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout
