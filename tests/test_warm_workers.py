"""warm_cache's workers import the caller's eagerc, whatever the working directory holds,
and a worker that cannot start puts its own error in the warm report."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc
import kernel_cache

pytestmark = pytest.mark.warm

# Installed before anything else in the worker (sitecustomize), as a broken environment
# would make `import eagerc` fail there and only there.
REFUSE_EAGERC = textwrap.dedent("""
    import sys


    class RefuseEagerc:
        def find_spec(self, name, path=None, target=None):
            if name == "eagerc":
                raise ImportError("planted: this interpreter cannot import eagerc")
            return None


    sys.meta_path.insert(0, RefuseEagerc())
""")


def test_a_worker_that_cannot_import_eagerc_reports_its_own_error(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(REFUSE_EAGERC)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU()).to("eagerc")
    report = eagerc.warm_cache(model, torch.randn(3, 6).to("eagerc"), workers=1)
    assert report.compiled == 0 and report.calls > 0
    # Every call fails with the worker's error: the next worker would fail the same way.
    assert len(report.failed) == report.calls, str(report)
    for _, _, reason in report.failed:
        assert reason.startswith("the worker died before it started (exit code 1): "), reason
        assert reason.endswith("ImportError: planted: this interpreter cannot import eagerc"), reason
        assert "EOFError" not in reason
    assert "ImportError: planted: this interpreter cannot import eagerc" in str(report)


WARM = textwrap.dedent("""
    import json
    import torch
    import eagerc

    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU()).to("eagerc")
    report = eagerc.warm_cache(model, torch.randn(3, 6).to("eagerc"), workers=1)
    print(json.dumps({"eagerc": eagerc.__file__, "compiled": report.compiled, "failed": report.failed}))
""")


def _install_elsewhere(folder) -> None:
    """eagerc and kernel_cache as plain packages in `folder`, as an install from a wheel
    lays them out: each entry of their __path__ linked, and the extension _eagerc beside
    them."""
    for package in (eagerc, kernel_cache):
        target = folder / package.__name__
        target.mkdir(parents=True)
        for source in package.__path__:
            for entry in os.listdir(source):
                if entry != "__pycache__" and not (target / entry).exists():
                    (target / entry).symlink_to(os.path.join(source, entry))
    (folder / os.path.basename(eagerc._C.__file__)).symlink_to(eagerc._C.__file__)


def _interpreter_without_this_install(tmp_path) -> str:
    """A virtual environment that sees this process's import folders (but those holding
    eagerc's sources) as plain folders: torch and the other dependencies import, but no
    .pth file there runs, so an editable install's import hook (which would find eagerc
    ahead of any folder) is absent."""
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                          capture_output=True, text=True, timeout=300)
    if made.returncode != 0:
        pytest.skip(f"no virtual environment here: {made.stderr.strip()[-300:]}")
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=300).stdout.strip()
    folders = [p for p in sys.path if os.path.isdir(p) and not any(
        os.path.exists(os.path.join(p, package, "__init__.py")) for package in ("eagerc", "kernel_cache"))]
    with open(os.path.join(purelib, "dependencies.pth"), "w") as f:
        f.write("\n".join(folders) + "\n")
    return python


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "symlink"), reason="lays out the install with symbolic links")
def test_workers_import_the_callers_eagerc_not_the_working_directorys(tmp_path):
    # A checkout of the repository (an eagerc without _C) as the working directory, eagerc
    # installed elsewhere: `python -m` workers imported the checkout's and every call failed.
    installed = tmp_path / "installed"
    _install_elsewhere(installed)
    python = _interpreter_without_this_install(tmp_path)
    checkout = tmp_path / "checkout"
    (checkout / "eagerc").mkdir(parents=True)
    (checkout / "eagerc" / "__init__.py").write_text(
        'raise ImportError("the checkout\'s eagerc: no _C")\n')
    (tmp_path / "warm.py").write_text(WARM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env.update(PYTHONPATH=str(installed), EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([python, str(tmp_path / "warm.py")], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["eagerc"] == str(installed / "eagerc" / "__init__.py")
    assert result["failed"] == [], run.stderr[-3000:]
    assert result["compiled"] > 0, (result, run.stderr[-5000:])
