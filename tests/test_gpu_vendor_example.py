"""A third-party device whose memory is CUDA memory (examples/mygpu: its own cudaMalloc
allocator and runtime, an Inductor backend that is Inductor's Triton code generator with
CUDA's wrapper and device op overrides, no compute kernel) runs models through eagerc:
the example's tests (its runtime is all it registers; BERT and ResNet forwards and a BERT
training step with AdamW equal CPU eager) in a fresh interpreter, the example installed as
its README has it (torch.backends entry point: `import torch` loads it, in the compile
service's workers too). Its C++ runtime is built on first import (torch.utils.cpp_extension,
cached per machine). Skipped where torch sees no CUDA GPU; what a machine without one can
check is in tests/test_triton_vendor_target.py."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tomllib

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mygpu"


def installed(folder: pathlib.Path) -> pathlib.Path:
    """`folder` holding mygpu's distribution metadata as pip installs it (its entry points);
    the package itself is imported from the checkout. Only the test's interpreters have it
    on their path: installed here it would be every process's PrivateUse1."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = folder / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in project["entry-points"].items()))
    return folder


def test_the_gpu_example_device_runs_bert_resnet_and_a_training_step(tmp_path):
    path = [str(installed(tmp_path / "site")), str(EXAMPLE), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path)), "PYTHONFAULTHANDLER": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests"],
                            cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "7 passed" in result.stdout, result.stdout[-3000:]
