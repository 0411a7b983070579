"""The ecosystem's frameworks on the eagerc device (docs/ecosystem.md): transformers'
Trainer through accelerate, Lightning (eagerc/device/lightning.py), DeviceMesh and
DTensor, torch.profiler; each against the same run on the CPU (eagerc.testing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import eagerc  # noqa: F401
from eagerc.testing import assert_close

WORKER = os.path.join(os.path.dirname(__file__), "side_effects_worker.py")

# Where torch sees a CUDA GPU, import eagerc registers the device only when asked
# (EAGERC_BACKING=cuda or EAGERC_DEVICE=1).
pytestmark = pytest.mark.skipif(not hasattr(torch, "eagerc"),
                                reason="the eagerc device is not registered")


def _tiny_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


# --- accelerate and transformers' Trainer ---------------------------------------------

@pytest.fixture
def accelerate_state():
    pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def test_accelerate_picks_the_device(accelerate_state):
    # accelerate takes torch's accelerator when it is available (the device, once the
    # program has put a tensor on it; a program that never does keeps the CPU:
    # tests/test_import_side_effects.py) unless told cpu=True; prepare() moves the model there.
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    torch.ones(1, device="eagerc")
    assert torch.accelerator.is_available()
    accelerator = Accelerator()
    assert accelerator.device.type == "eagerc"
    model = accelerator.prepare(_tiny_mlp())
    assert {p.device.type for p in model.parameters()} == {"eagerc"}
    accelerator.free_memory()  # torch.accelerator.empty_cache() on the device
    AcceleratorState._reset_state(True)
    assert Accelerator(cpu=True).device == torch.device("cpu")


def _trainer_report(tmp_path, name: str, scenario: str, env: dict) -> dict:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, WORKER, str(out), "1", scenario],
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())[scenario]["result"]
    assert "error" not in result, result.get("error")
    return result


def _tensor(bits: dict) -> torch.Tensor:
    raw = torch.frombuffer(bytearray.fromhex(bits["bytes"]), dtype=torch.uint8)
    return raw.view(getattr(torch, bits["dtype"].split(".")[1])).reshape(bits["shape"])


@pytest.mark.slow
def test_trainer_trains_on_the_device_through_accelerate(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    # ACCELERATE_TORCH_DEVICE=eagerc: accelerate's state and transformers' TrainingArguments
    # both take the device (without it they disagree: docs/ecosystem.md).
    on_cpu = _trainer_report(tmp_path, "cpu", "trainer", {})
    on_device = _trainer_report(tmp_path, "eagerc", "trainer_on_accelerator",
                                {"ACCELERATE_TORCH_DEVICE": "eagerc"})
    assert on_cpu["model_device"] == "cpu"
    assert (on_device["device"], on_device["accelerate_device"]) == ("eagerc", "eagerc")
    assert on_device["model_device"].startswith("eagerc")
    losses = [float.fromhex(x) for x in on_device["losses"]]
    assert len(losses) == 3
    assert_close(torch.tensor(losses), torch.tensor([float.fromhex(x) for x in on_cpu["losses"]]),
                 model=True)
    assert on_device["params"].keys() == on_cpu["params"].keys()
    for name, bits in on_device["params"].items():
        assert bits["device"] == "eagerc", name
        assert_close(_tensor(bits), _tensor(on_cpu["params"][name]), model=True)


# --- Lightning --------------------------------------------------------------------------

def _lightning_trainer(accelerator: str, **kwargs):
    lightning = pytest.importorskip("lightning")

    return lightning.Trainer(accelerator=accelerator, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, **kwargs)


def test_lightning_accelerator_and_strategy():
    pytest.importorskip("lightning")
    import eagerc.device.lightning as eagerc_lightning

    trainer = _lightning_trainer("eagerc", strategy="single_eagerc")
    assert isinstance(trainer.accelerator, eagerc_lightning.EagercAccelerator)
    assert trainer.strategy.root_device == torch.device("eagerc", 0)
    assert _lightning_trainer("auto").strategy.root_device == torch.device("cpu")
    assert eagerc_lightning.EagercAccelerator.parse_devices("auto") == [0]
    with pytest.raises(ValueError, match="the eagerc device has 1 index"):
        eagerc_lightning.EagercAccelerator.parse_devices(2)
    with pytest.raises(ValueError, match="strategy='single_eagerc'"):
        trainer.accelerator.setup_device(torch.device("cpu"))


def test_fabric_moves_a_module_to_the_device():
    lightning = pytest.importorskip("lightning")

    import eagerc.device.lightning  # noqa: F401

    fabric = lightning.Fabric(accelerator="eagerc", strategy="single_eagerc")
    assert fabric.device == torch.device("eagerc", 0)
    model = fabric.setup(_tiny_mlp())
    assert {p.device.type for p in model.parameters()} == {"eagerc"}
    assert fabric.to_device(torch.ones(2)).device.type == "eagerc"


@pytest.mark.slow
def test_lightning_fit_matches_cpu():
    lightning = pytest.importorskip("lightning")

    import eagerc.device.lightning  # noqa: F401

    class Regression(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _tiny_mlp()

        def training_step(self, batch, index):
            x, y = batch
            devices.add(x.device.type)
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    generator = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 8, generator=generator),
                                          torch.randn(16, 1, generator=generator))
    params = {}
    for accelerator, strategy in (("cpu", "auto"), ("eagerc", "single_eagerc")):
        devices = set()
        module = Regression()
        _lightning_trainer(accelerator, strategy=strategy, max_steps=3).fit(
            module, torch.utils.data.DataLoader(data, batch_size=4))
        assert devices == {accelerator}  # the batches the steps saw
        # Lightning moves the module back to the CPU when fit ends.
        params[accelerator] = dict(module.named_parameters())
    for name, p in params["eagerc"].items():
        assert_close(p.detach().cpu(), params["cpu"][name].detach(), model=True)


# --- DeviceMesh and DTensor ---------------------------------------------------------------

@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group(store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_device_mesh_and_dtensor(one_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("eagerc", (1,))
    assert mesh.device_type == "eagerc"
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    da = distribute_tensor(a.to("eagerc"), mesh, [Shard(0)])
    db = distribute_tensor(b.to("eagerc"), mesh, [Replicate()])
    product = (da @ db).redistribute(mesh, [Replicate()])
    assert product.to_local().device.type == "eagerc"
    assert_close(product.full_tensor().cpu(), a @ b)
    # The mesh's group is the default one, whose backend for the device is its memory's.
    memory = os.environ.get("EAGERC_BACKING", "cpu").lower()
    backend = mesh.get_group()._get_backend(torch.device("eagerc"))
    assert backend.name() == {"cpu": "gloo", "cuda": "nccl"}[memory]


# --- torch.profiler -----------------------------------------------------------------------

def _profiled_ops(device: str) -> list[tuple[str, list]]:
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(5, 7, device=device)
    b = torch.randn(7, 3, device=device)
    torch.mm(a, b).relu_()  # compiled before profiling: the profile holds only the run
    activities = [ProfilerActivity.CPU]
    if device != "cpu":
        activities.append(ProfilerActivity.PrivateUse1)
    with profile(activities=activities, record_shapes=True) as prof:
        torch.mm(a, b).relu_()
    # The ops called, not what their kernels call (CPU's relu_ calls clamp_min_; the
    # device's runs one compiled kernel).
    return [(e.name, e.input_shapes) for e in prof.events() if e.cpu_parent is None]


def test_profiler_lists_the_device_ops():
    # No Kineto plugin for the device: its ops are the dispatcher's events in the CPU
    # activity (their CPU time is the device's on host memory), the same as on the CPU.
    from torch.profiler import ProfilerActivity, supported_activities

    assert ProfilerActivity.PrivateUse1 in supported_activities()
    on_device = _profiled_ops("eagerc")
    assert ("aten::mm", [[5, 7], [7, 3]]) in on_device
    assert ("aten::relu_", [[5, 3]]) in on_device
    assert [name for name, _ in on_device] == [name for name, _ in _profiled_ops("cpu")]


@pytest.mark.skipif(os.environ.get("EAGERC_BACKING", "cpu").lower() != "cuda"
                    or not torch.cuda.is_available(),
                    reason="the device on GPU memory (EAGERC_BACKING=cuda, a CUDA GPU)")
def test_profiler_shows_the_device_kernels_on_gpu_memory():
    # On GPU memory the compiled kernels run on CUDA streams: CUPTI records them.
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(64, 64, device="eagerc")
    (a * 2).relu_()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (a * 2).relu_()
        torch.eagerc.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert kernels, [e.name for e in prof.events()]
