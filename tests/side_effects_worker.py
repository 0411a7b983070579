"""CPU workflows of tests/test_import_side_effects.py, run as their own process:

    python -W always tests/side_effects_worker.py OUT.json WITH_EAGERC SCENARIO [SCENARIO ...]

WITH_EAGERC is 1 (``import eagerc`` first, as a user who imports it for another reason)
or 0. Each scenario returns what it computed; OUT.json gets, per scenario, its results
(every float as its exact bits; a scenario that raised: its traceback) and the warnings
it raised (category and message). The test runs the CPU scenarios with and without
eagerc and compares; tests/test_frameworks_on_device.py runs ``trainer_on_accelerator``
with ``ACCELERATE_TORCH_DEVICE=eagerc`` against ``trainer``.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
import warnings

_SEEN: list = []
_FRAMEWORKS = ("accelerate", "lightning", "transformers")
# What eagerc loads with its first miss or load, never with its import (the compiler and
# the kernel cache's tiers): the report names those in sys.modules once torch (WITH_EAGERC
# 0) or eagerc (1) is imported.
_HEAVY = ("torch._inductor", "kernel_cache", "diskcache", "sqlite3", "redis", "sympy")


def _record(message, category, filename, lineno, file=None, line=None):
    _SEEN.append(f"{category.__name__}: {message}")


def _bits(value):
    """Exact, comparable JSON of a result: tensors as dtype, shape and their bytes."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        return {"dtype": str(t.dtype), "shape": list(t.shape), "device": value.device.type,
                "bytes": raw.hex()}
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _bits(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bits(v) for v in value]
    return value


def _tiny_mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Dropout(0.25),
                               torch.nn.Linear(16, 4))


def _train(model, steps: int = 3, forward=None):
    """Three SGD steps of ``model`` (or ``forward``) on seeded CPU data: losses, params."""
    import torch

    forward = forward or model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(6, 8, generator=generator)
        optimizer.zero_grad()
        loss = forward(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return {"losses": losses, "params": dict(model.state_dict())}


def process_group(tmp: str) -> dict:
    """The default process group (no backend named, world size 1): collectives, DDP and a
    DTensor on the CPU."""
    import torch
    import torch.distributed as dist

    store = dist.FileStore(os.path.join(tmp, "store"), 1)
    dist.init_process_group(store=store, rank=0, world_size=1)
    try:
        x = torch.arange(4.0)
        dist.all_reduce(x)
        dist.broadcast(x, src=0)
        dist.barrier()
        gathered = [None]
        dist.all_gather_object(gathered, {"rank": dist.get_rank()})
        model = _tiny_mlp()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        trained = _train(model, forward=ddp)
        return {"all_reduce": x, "objects": gathered, "backend": dist.get_backend(),
                "dtensor": _dtensor_matmul(), **trained}
    finally:
        dist.destroy_process_group()


def _dtensor_matmul():
    """A CPU DeviceMesh over the default group: a sharded DTensor matmul."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    torch.manual_seed(5)
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    product = distribute_tensor(a, mesh, [Shard(0)]) @ distribute_tensor(b, mesh, [Replicate()])
    return product.full_tensor()


def gloo_ddp(tmp: str) -> dict:
    """init_process_group("gloo") and DDP on the CPU."""
    import torch
    import torch.distributed as dist

    store = dist.FileStore(os.path.join(tmp, "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = _tiny_mlp()
        return _train(model, forward=torch.nn.parallel.DistributedDataParallel(model))
    finally:
        dist.destroy_process_group()


def autocast(tmp: str) -> dict:
    """CPU autocast to bfloat16, forward and backward."""
    import torch

    model = _tiny_mlp()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        trained = _train(model)
        y = model(torch.ones(2, 8))
    return {**trained, "dtype": str(y.dtype), "y": y}


def checkpoint(tmp: str) -> dict:
    """torch.utils.checkpoint (both kinds) around a dropout: the recomputation replays
    the CPU's random state; under CPU autocast as well."""
    import torch
    from torch.utils.checkpoint import checkpoint as ckpt

    model = _tiny_mlp()
    results = {}
    for reentrant in (False, True):
        torch.manual_seed(2)
        results[f"reentrant={reentrant}"] = _train(
            model, forward=lambda x: ckpt(model, x.requires_grad_(), use_reentrant=reentrant))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        results["autocast"] = _train(model, forward=lambda x: ckpt(model, x, use_reentrant=False))
    return results


def dataloader(tmp: str) -> dict:
    """A DataLoader with pin_memory=True (no worker, then two workers)."""
    import torch

    data = torch.utils.data.TensorDataset(torch.arange(24.0).reshape(12, 2), torch.arange(12))
    batches = {}
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(data, batch_size=5, shuffle=True, pin_memory=True,
                                             num_workers=workers,
                                             generator=torch.Generator().manual_seed(3))
        batches[workers] = [list(b) for b in loader]
    return batches


def saving(tmp: str) -> dict:
    """torch.save/torch.load, and torch.distributed.checkpoint's save, async_save and load
    (one process, no group) of a CPU state dict."""
    import torch
    import torch.distributed.checkpoint as dcp

    state = dict(_tiny_mlp().state_dict())
    torch.save(state, os.path.join(tmp, "state.pt"))
    loaded = torch.load(os.path.join(tmp, "state.pt"))
    dcp.save(state, checkpoint_id=os.path.join(tmp, "sync"))
    dcp.async_save(state, checkpoint_id=os.path.join(tmp, "async")).result()
    restored = {}
    for kind in ("sync", "async"):
        restored[kind] = {k: torch.zeros_like(v) for k, v in state.items()}
        dcp.load(restored[kind], checkpoint_id=os.path.join(tmp, kind))
    return {"torch.load": loaded, **restored}


def compile_eager(tmp: str) -> dict:
    """torch.compile(backend="eager") training a CPU model."""
    import torch

    model = _tiny_mlp()
    return _train(model, forward=torch.compile(model, backend="eager"))


def compile_inductor(tmp: str) -> dict:
    """torch.compile (Inductor, C++) forward and backward of a CPU model."""
    import torch

    model = _tiny_mlp()
    return _train(model, steps=2, forward=torch.compile(model))


def accelerate_cpu(tmp: str) -> dict:
    """accelerate's Accelerator(cpu=True): prepare, three steps, free_memory."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = _tiny_mlp()
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(torch.randn(6, 8, generator=generator)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        losses.append(loss)
    accelerator.free_memory()
    return {"device": str(accelerator.device), "losses": losses,
            "params": dict(accelerator.unwrap_model(model).state_dict())}


def accelerate_default(tmp: str) -> dict:
    """accelerate's Accelerator() with default arguments: its device and three steps."""
    from accelerate import Accelerator

    import torch

    accelerator = Accelerator()
    model = accelerator.prepare(_tiny_mlp())
    generator = torch.Generator().manual_seed(1)
    outputs = [model(torch.randn(6, 8, generator=generator).to(accelerator.device)).sum()
               for _ in range(2)]
    return {"device": str(accelerator.device), "outputs": [o.cpu() for o in outputs]}


def data_parallel(tmp: str) -> dict:
    """nn.DataParallel around a CPU model: with no GPU it runs the module as it is."""
    import torch

    model = torch.nn.DataParallel(_tiny_mlp())
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    return {"device_ids": model.device_ids, "out": model(x)}


def trainer_default(tmp: str) -> dict:
    """transformers' Trainer with default arguments (no use_cpu) on a machine without a GPU."""
    return _trainer(tmp, use_cpu=False)


def trainer(tmp: str) -> dict:
    """transformers' Trainer on a tiny random GPT-2, three steps, on the CPU (use_cpu)."""
    return _trainer(tmp, use_cpu=True)


def trainer_on_accelerator(tmp: str) -> dict:
    """The same Trainer where accelerate puts it (tests/test_frameworks_on_device.py sets
    ``ACCELERATE_TORCH_DEVICE=eagerc``)."""
    return _trainer(tmp, use_cpu=False)


def _trainer(tmp: str, use_cpu: bool) -> dict:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    # No dropout: results are compared between CPU and the device, whose dropout is ATen's
    # native_dropout (the same mask, scaled by a multiply where CPU eager divides: the last
    # bit can differ).
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    generator = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 64, (8, 12), generator=generator)
    data = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(output_dir=os.path.join(tmp, "trainer"), max_steps=3,
                             per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, report_to=[], save_strategy="no", use_cpu=use_cpu,
                             seed=0, disable_tqdm=True)
    run = Trainer(model=model, args=args, train_dataset=data)
    output = run.train()
    losses = [entry["loss"] for entry in run.state.log_history if "loss" in entry]
    return {"device": str(args.device), "model_device": str(model.device),
            "accelerate_device": str(run.accelerator.device), "losses": losses,
            "train_loss": output.training_loss, "params": dict(model.state_dict())}


def main() -> None:
    out, with_eagerc, *scenarios = sys.argv[1:]
    warnings.showwarning = _record
    if with_eagerc == "1":
        import eagerc  # noqa: F401
    # What import eagerc imported of the frameworks (none: eagerc imports none of them).
    frameworks = sorted(m for m in _FRAMEWORKS if m in sys.modules)
    report = {"import": {"result": frameworks, "warnings": sorted(set(_SEEN))}}
    if with_eagerc != "1":
        import torch  # noqa: F401  (what torch itself loads of _HEAVY, to compare with)
    report["import"]["heavy"] = [m for m in _HEAVY if m in sys.modules]
    for name in scenarios:
        del _SEEN[:]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                result = _bits(globals()[name](tmp))
            except Exception:  # reported, and the other scenarios still run
                result = {"error": traceback.format_exc()}
            seen = sorted({w.replace(tmp, "<tmp>") for w in _SEEN})
        report[name] = {"result": result, "warnings": seen}
    with open(out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
