"""``import eagerc`` changes nothing for code that does not use the device
(docs/ecosystem.md): CPU workflows (tests/side_effects_worker.py) run in fresh processes
with and without ``import eagerc`` give the same bits and no new warnings (``python -W
always``). Frameworks that choose a default device (accelerate's ``Accelerator()``,
transformers' ``Trainer``, ``nn.DataParallel``, DataLoader's pinning) keep the CPU: the
device reports itself available only once the program has put a tensor on it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import eagerc  # noqa: F401

WORKER = os.path.join(os.path.dirname(__file__), "side_effects_worker.py")

# Each group of scenarios is one pair of processes (with and without eagerc, at once).
FAST = ("process_group", "gloo_ddp", "autocast", "checkpoint", "dataloader", "saving",
        "data_parallel")


def _run_both(scenarios, tmp_path) -> tuple[dict, dict]:
    """The worker's reports without and with ``import eagerc``."""
    procs, outs = [], []
    for with_eagerc in ("0", "1"):
        out = tmp_path / f"eagerc={with_eagerc}.json"
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, "-W", "always", WORKER, str(out), with_eagerc, *scenarios],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p, out in zip(procs, outs):
        log = p.communicate(timeout=900)[0]
        assert p.returncode == 0, f"{out.name}:\n{log[-4000:]}"
    plain, with_eagerc = (json.loads(out.read_text()) for out in outs)
    assert with_eagerc["import"]["warnings"] == [], "import eagerc warned"
    return plain, with_eagerc


def _assert_unchanged(scenario: str, plain: dict, with_eagerc: dict) -> None:
    before, after = plain[scenario], with_eagerc[scenario]
    errors = [report["result"].get("error") if isinstance(report["result"], dict) else None
              for report in (before, after)]
    if errors[0] is not None and torch.cuda.is_available():
        # On a GPU machine torch's init_process_group() serves CUDA alone: CPU collectives
        # fail there without eagerc too.
        pytest.skip(f"{scenario} fails without import eagerc on this machine: "
                    f"{errors[0].splitlines()[-1]}")
    assert errors[0] is None, f"{scenario} failed without import eagerc:\n{errors[0]}"
    assert errors[1] is None, f"{scenario} failed with import eagerc:\n{errors[1]}"
    new = sorted(set(after["warnings"]) - set(before["warnings"]))
    assert not new, f"{scenario}: warnings only with import eagerc: {new}"
    assert after["result"] == before["result"], f"{scenario}: results differ with import eagerc"


@pytest.fixture(scope="module")
def fast_reports(tmp_path_factory):
    return _run_both(FAST, tmp_path_factory.mktemp("side_effects"))


@pytest.mark.parametrize("scenario", FAST)
def test_cpu_workflow_unchanged(scenario, fast_reports):
    _assert_unchanged(scenario, *fast_reports)


def test_import_eagerc_imports_no_framework(fast_reports):
    # eagerc/device/lightning.py is imported by Lightning's user, never by eagerc.
    plain, with_eagerc = fast_reports
    assert plain["import"]["result"] == with_eagerc["import"]["result"] == []


@pytest.mark.skipif(not hasattr(torch, "eagerc"), reason="the eagerc device is not registered")
def test_default_process_group_keeps_cpu():
    # init_process_group() with no backend: the CPU keeps gloo, and the device is added.
    config = dist.distributed_c10d.BackendConfig(dist.Backend(dist.Backend.UNDEFINED))
    memory = os.environ.get("EAGERC_BACKING", "cpu").lower()
    expected = {"cpu": "gloo", "eagerc": {"cpu": "gloo", "cuda": "nccl"}[memory]}
    if memory == "cuda":
        expected["cuda"] = "nccl"
    assert config.get_device_backend_map() == expected
    # A backend named keeps torch's map.
    assert dist.distributed_c10d.BackendConfig(dist.Backend("cpu:gloo")).get_device_backend_map() \
        == {"cpu": "gloo"}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["compile_eager", "compile_inductor", "accelerate_cpu",
                                      "accelerate_default", "trainer", "trainer_default"])
def test_framework_on_cpu_unchanged(scenario, tmp_path):
    _assert_unchanged(scenario, *_run_both([scenario], tmp_path))


@pytest.mark.skipif(not hasattr(torch, "eagerc"), reason="the eagerc device is not registered")
@pytest.mark.parametrize("first_use", ["torch.ones(2).to('eagerc')",
                                       "torch.load(PATH, map_location='eagerc')",
                                       "torch.empty(2, device='eagerc:0')"])
def test_the_device_is_available_from_its_first_use(first_use, tmp_path):
    # Frameworks pick "the accelerator" only when it is available: after import eagerc it
    # is not, until the program puts a tensor on the device (torch.load onto it counts).
    path = tmp_path / "state.pt"
    torch.save({"w": torch.arange(3.0)}, path)
    script = (
        "import torch, eagerc\n"
        "from torch._utils import _get_available_device_type\n"
        f"PATH = {str(path)!r}\n"
        "before = (torch.accelerator.is_available(), _get_available_device_type())\n"
        f"{first_use}\n"
        "after = (torch.accelerator.is_available(), _get_available_device_type())\n"
        "print(before, after)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "(False, None) (True, 'eagerc')"


def test_import_eagerc_loads_no_compiler_and_no_storage(fast_reports):
    # Inductor, the kernel cache's tiers (diskcache, sqlite3, redis) come with the first
    # miss or load, not with `import eagerc`: a program that never uses the device pays
    # neither their import time nor their memory. (The worker's processes report what of
    # them is loaded after import torch, and after import eagerc.)
    plain, with_eagerc = fast_reports
    torch_loads = set(plain["import"]["heavy"])
    assert [m for m in with_eagerc["import"]["heavy"] if m not in torch_loads] == []
