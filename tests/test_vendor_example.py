"""A third-party device (examples/mydevice: its own runtime, an Inductor backend that reuses
Inductor's C++ code generator, no compute kernel) runs models through eagerc. Each check
runs in a fresh interpreter: a process has one PrivateUse1 backend, and in this one it is
the eagerc device.

Installed, the example is a device backend torch loads at `import torch` (its
`torch.backends` entry point). Installing it into this environment would make it every
process's PrivateUse1, so `installed` puts its distribution metadata (the entry points its
pyproject.toml declares, what pip writes) in a folder of its own that only the checks'
interpreters have on their path."""
from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mydevice"


def installed(folder: pathlib.Path) -> pathlib.Path:
    """`folder` holding mydevice's distribution metadata as pip installs it (the package
    itself is imported from the checkout: its runtime's build is cached by source path)."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = folder / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in project["entry-points"].items()))
    return folder


def _python(args, cwd=ROOT, timeout=1800, env=None, site=None):
    """`site`: a folder from `installed`, first on the path (mydevice autoloads)."""
    path = [str(site) if site else None, str(EXAMPLE), os.environ.get("PYTHONPATH")]
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(filter(None, path))}
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


@pytest.mark.slow  # minutes from empty caches: a vendor build, or 9 ops twice
def test_an_installed_device_is_served_whatever_the_import_order(tmp_path):
    # `import torch` loads mydevice (entry point) and its _autoload imports eagerc: eagerc
    # imported first (it imports torch before looking at PrivateUse1) or not at all, the
    # device is mydevice and eagerc serves it. Turned off, eagerc imported first takes
    # PrivateUse1 for its own device (what the entry point is for).
    site = installed(tmp_path / "site")
    run = ("x = torch.arange(12.).reshape(3, 4)\n"
           "y = torch.softmax(x.to('mydevice'), -1)\n"
           "assert y.device.type == 'mydevice' and torch.allclose(y.cpu(), torch.softmax(x, -1))\n"
           "print(torch._C._get_privateuse1_backend_name(), sorted(eagerc.targets.known_targets()))\n")
    env = {"EAGERC_COMPILE": "now"}
    for first in ("import eagerc, torch\n", "import torch\nimport sys; eagerc = sys.modules['eagerc']\n"):
        result = _python(["-c", first + run], env=env, site=site, timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert result.stdout.split("\n")[0] == "mydevice ['cpu', 'mydevice']", first
    result = _python(["-c", "import eagerc, torch, sys\n"
                            "print(torch._C._get_privateuse1_backend_name(), 'mydevice' in sys.modules)\n"],
                     env={**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, site=site)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[0] == "eagerc False"


def test_eagerc_is_no_device_backend_torch_loads():
    # `import torch` must not import eagerc for everyone who has it installed: its own device
    # is registered by `import eagerc` only (tests/test_import_side_effects.py); a vendor's
    # package is what autoloads, and imports eagerc itself.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch.backends" not in project.get("entry-points", {})
    loaded = [e for e in importlib.metadata.entry_points(group="torch.backends")
              if e.value.split(":")[0].split(".")[0] == "eagerc"]
    assert loaded == []


@pytest.mark.slow
def test_the_example_device_runs_bert_resnet_and_a_training_step(tmp_path):
    # examples/mydevice/tests: its runtime is all it registers; BERT and ResNet forwards and
    # a BERT training step (AdamW) on it equal CPU eager. Its C++ runtime is built on first
    # import (torch.utils.cpp_extension, cached per machine). Installed, as its README has it.
    result = _python(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests"], cwd=EXAMPLE,
                     site=installed(tmp_path / "site"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "5 passed" in result.stdout


@pytest.mark.slow
def test_the_coverage_tool_reports_on_the_example_device(tmp_path):
    # The installed device is loaded by `import torch`, in the command and in each of its
    # worker processes: nothing names it but --device.
    ops = "aten::abs,aten::mm,aten::nonzero,aten::view,aten::softmax.int"
    result = _python(["-m", "eagerc.coverage", "--device", "mydevice", "--ops", ops, "--workers", "1",
                      "--samples", "2", "--timeout", "600", "--quiet", "--out", str(tmp_path / "cov")],
                     site=installed(tmp_path / "site"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "cov" / "report.json").read_text())
    assert report["device"] == "mydevice"
    status = {op: entry["results"]["float32"]["status"] for op, entry in report["ops"].items()}
    # generated code; an extern (CPU BLAS on the device's own tensors); ATen's CPU kernel on
    # aliases (a data-dependent shape); the device's own runtime; a composite.
    assert status == {"aten::abs": "pass", "aten::mm": "extern", "aten::nonzero": "aliased",
                      "aten::view": "runtime", "aten::softmax.int": "decomposed"}


@pytest.mark.slow  # the example device's compiles in a subprocess: 207 s on a busy 2-core machine
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


# The check's compile service looks alive to its client (the check holds the service's
# lock itself) and never runs: every miss is queued and answered in the interim, and
# nothing compiles, so the counts are the interim path's own.
_INTERIM_ONLY = """
import fcntl, json, os
import torch, eagerc
from eagerc.compile_service import client, spool
folder = client.folder_for(os.environ)
spool.make_folders(folder)
lock = os.open(os.path.join(folder, spool.LOCK), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(lock, fcntl.LOCK_EX)
from torch.profiler import ProfilerActivity, profile
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, 8, 16, generator=g) for _ in range(3))
mask = torch.zeros(8, 8).masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), float('-inf'))
want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
on = [t.to("mydevice") for t in (q, k, v, mask)]
with profile(activities=[ProfilerActivity.CPU]) as p:
    got = [torch.nn.functional.scaled_dot_product_attention(*on[:3], attn_mask=on[3]) for _ in range(3)]
stats = eagerc.stats()
print(json.dumps({
    "equal": all(torch.equal(t.cpu(), want) for t in got),
    "copies": sum(e.count for e in p.key_averages() if e.key == "aten::_copy_from"),
    "ops": {name: [op["misses"], op["interim"]] for name, op in stats["ops"].items()},
    "compiles": stats["compiles"], "host_round_trips": stats["host_round_trips"]}))
"""


@pytest.mark.slow  # the first use of the example's runtime builds it (g++, 35 CPU s; 1.5-3 min under load)
@pytest.mark.parametrize("aliases", ["1", "0"])
def test_the_example_devices_first_attention_calls_are_one_op_each(tmp_path, aliases):
    # The example registers no attention choice of its own; on its host memory eagerc gives
    # it the CPU's, as on the eagerc device: a first run's attention is one miss per call
    # (the CPU's fused attention), not the math path's seven, each answered in the interim
    # with eager's bits. On aliases (the default) the interim call copies nothing; with
    # them off (a device with no home) it is the host round trip, which copies each tensor
    # argument to the host once (query, key, value, mask) and each result back once (the
    # output and its logsumexp).
    site = installed(tmp_path / "site")
    env = {"EAGERC_COMPILE": "background", "EAGERC_CACHE_DIR": str(tmp_path / "cache"),
           "EAGERC_ALIAS_FALLBACK": aliases}
    result = _python(["-c", _INTERIM_ONLY], env=env, site=site, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["equal"]
    assert got["ops"] == {"aten::_scaled_dot_product_flash_attention_for_cpu@PrivateUse1": [3, 3]}
    assert got["compiles"] == 0 and got["host_round_trips"] == 0
    assert got["copies"] == (0 if aliases == "1" else 3 * (4 + 2))


@pytest.mark.slow  # the example's runtime, as above
def test_the_cpus_attention_choice_leaves_with_eagerc(tmp_path):
    # Disabled, eagerc serves no fused attention on the example device: attention there
    # takes ATen's math path again (which the example, with no kernels of its own, cannot
    # run either), never an op nothing serves.
    code = ("import torch, eagerc\n"
            "q = torch.randn(1, 2, 8, 16).to('mydevice')\n"
            "eagerc.disable('mydevice')\n"
            "try:\n"
            "    torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"
            "except NotImplementedError as e:\n"
            "    print(str(e).splitlines()[0])\n")
    result = _python(["-c", code], env={"EAGERC_CACHE_DIR": str(tmp_path / "cache")},
                     site=installed(tmp_path / "site"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "aten::" in result.stdout and "flash_attention" not in result.stdout, result.stdout
