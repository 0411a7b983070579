"""A third-party device (examples/mydevice: its own runtime, an Inductor backend that reuses
Inductor's C++ code generator, no compute kernel) runs models through eagerc. Each check
runs in a fresh interpreter: a process has one PrivateUse1 backend, and in this one it is
the eagerc device."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mydevice"


def _python(args, cwd=ROOT, timeout=1800, env=None):
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_eagerc_leaves_a_renamed_privateuse1_to_its_backend():
    # A backend with no Inductor backend: eagerc registers nothing and says why.
    result = _python(["-W", "always", "-c", (
        "import torch; torch.utils.rename_privateuse1_backend('foo')\n"
        "import eagerc\n"
        "print(torch._C._get_privateuse1_backend_name(), eagerc.targets.known_targets(), "
        "torch._C._dispatch_has_kernel_for_dispatch_key('aten::add.Tensor', 'PrivateUse1'))\n")])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "foo ['cpu'] False"
    assert "eagerc does not serve the PrivateUse1 device 'foo': " in result.stderr
    assert "Inductor has no backend for 'foo'" in result.stderr


@pytest.mark.slow
def test_the_example_device_runs_bert_resnet_and_a_training_step():
    # examples/mydevice/tests: its runtime is all it registers; BERT and ResNet forwards and
    # a BERT training step (AdamW) on it equal CPU eager. Its C++ runtime is built on first
    # import (torch.utils.cpp_extension, cached per machine).
    result = _python(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests"], cwd=EXAMPLE)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "5 passed" in result.stdout


@pytest.mark.slow
def test_the_coverage_tool_reports_on_the_example_device(tmp_path):
    # EAGERC_IMPORT has `import eagerc` import the vendor's package first, in the command
    # and in each of its worker processes.
    ops = "aten::abs,aten::mm,aten::nonzero,aten::view,aten::softmax.int"
    result = _python(["-m", "eagerc.coverage", "--device", "mydevice", "--ops", ops, "--workers", "1",
                      "--samples", "2", "--timeout", "600", "--quiet", "--out", str(tmp_path / "cov")],
                     env={"EAGERC_IMPORT": "mydevice"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "cov" / "report.json").read_text())
    assert report["device"] == "mydevice"
    status = {op: entry["results"]["float32"]["status"] for op, entry in report["ops"].items()}
    # generated code; an extern (CPU BLAS on the device's own tensors); ATen's CPU kernel on
    # aliases (a data-dependent shape); the device's own runtime; a composite.
    assert status == {"aten::abs": "pass", "aten::mm": "extern", "aten::nonzero": "aliased",
                      "aten::view": "runtime", "aten::softmax.int": "decomposed"}


def test_the_example_device_serves_what_it_cannot_compile_by_extern_or_host_round_trip():
    # As a vendor sees it (aliases off): linalg_eig (no lowering, complex results, no C shim)
    # goes through the host round trip, with one warning for two calls and a counter;
    # _fft_r2c is an extern its code generator lists (c_shim_cpu.h). Both equal CPU eager.
    result = _python(["-c", (
        "import warnings, torch, mydevice, eagerc\n"
        "from eagerc.testing import assert_close\n"
        "x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    got = [torch.linalg.eig(x.to('mydevice')) for _ in range(2)]\n"
        "    f = torch.fft.fft(x.to('mydevice'))\n"
        "assert all(t.device.type == 'mydevice' for g in got for t in g)\n"
        "assert_close(tuple(t.cpu() for t in got[1]), tuple(torch.linalg.eig(x)))\n"
        "assert f.device.type == 'mydevice'; assert_close(f.cpu(), torch.fft.fft(x))\n"
        "msgs = [str(w.message) for w in caught if 'host round trip' in str(w.message)]\n"
        "assert len(msgs) == 1 and 'aten::linalg_eig' in msgs[0] and 'mydevice' in msgs[0], msgs\n"
        "ops = eagerc.stats()['ops']\n"
        "assert ops['aten::linalg_eig@PrivateUse1']['host_round_trips'] == 2, ops\n"
        "assert ops['aten::_fft_r2c@PrivateUse1']['externs'] == 1, ops\n"
        "print('OK')\n")], env={"EAGERC_ALIAS_FALLBACK": "0", "EAGERC_COMPILE": "now"}, timeout=900)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]


def test_coverage_refuses_a_device_eagerc_cannot_serve(tmp_path):
    result = _python(["-m", "eagerc.coverage", "--device", "meta", "--out", str(tmp_path / "cov")])
    assert result.returncode == 2
    assert "coverage: --device meta: eagerc cannot serve device 'meta'" in result.stderr
