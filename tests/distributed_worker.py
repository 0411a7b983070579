"""One rank of a tests/test_distributed.py scenario, run as its own process:

    python tests/distributed_worker.py SCENARIO RANK WORLD PORT OUT_DIR [BACKEND]

Each scenario runs the same steps on the CPU and on the eagerc device (or, for the error
scenarios, on the device named in SCENARIO) and writes what it saw to OUT_DIR/<rank>.json;
the test compares. Rank 0 hosts the TCP store on 127.0.0.1:PORT.
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

import eagerc  # noqa: F401  (registers the device and its collectives)

warnings.simplefilter("ignore", FutureWarning)  # all_gather_into_tensor's rename


def _values(t: torch.Tensor) -> list:
    return t.detach().cpu().tolist()


def collectives(rank: int, world: int, device: str) -> dict:
    seen = {}
    x = torch.arange(4, dtype=torch.float32, device=device) + 10 * rank
    dist.all_reduce(x)
    seen["all_reduce"] = _values(x)
    m = torch.full((3,), float(rank + 1), device=device)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    seen["all_reduce_max"] = _values(m)
    outs = [torch.empty(2, 3, device=device) for _ in range(world)]
    dist.all_gather(outs, torch.full((2, 3), float(rank), device=device))
    seen["all_gather"] = [_values(o) for o in outs]
    flat = torch.empty(2 * world, dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(flat, torch.tensor([rank, -rank], device=device))
    seen["all_gather_into_tensor"] = _values(flat)
    shard = torch.empty(2, device=device)
    dist.reduce_scatter_tensor(shard, torch.arange(2.0 * world, device=device) * (rank + 1))
    seen["reduce_scatter_tensor"] = _values(shard)
    pieces = [torch.full((2,), float(rank * 10 + i), device=device) for i in range(world)]
    mine = torch.empty(2, device=device)
    dist.reduce_scatter(mine, pieces)
    seen["reduce_scatter"] = _values(mine)
    b = torch.full((5,), float(rank), device=device)[1:4]  # a view: offset into its storage
    dist.broadcast(b, src=world - 1)
    seen["broadcast_view"] = _values(b)
    a = torch.full((4,), float(rank + 1), dtype=torch.bfloat16, device=device)
    work = dist.all_reduce(a, async_op=True)
    seen["async_handle"] = type(work).__name__
    work.wait()
    # NCCL's wait() only orders the current stream after the collective: the work is
    # complete once the device has caught up (gloo's is at once).
    getattr(torch, torch.device(device).type).synchronize()
    seen["async_completed"] = work.is_completed()
    seen["async_all_reduce_bf16"] = _values(a.float())
    dist.barrier()
    seen["barrier"] = True
    import torch.distributed._functional_collectives as fc

    group = dist.group.WORLD
    r = fc.all_reduce(torch.full((3,), float(rank), device=device), "sum", group)
    g = fc.all_gather_tensor(torch.full((2,), float(rank), device=device), 0, group)
    s = fc.reduce_scatter_tensor(torch.arange(2.0 * world, device=device), "sum", 0, group)
    seen["functional"] = {"all_reduce": _values(r), "all_gather": _values(g),
                          "reduce_scatter": _values(s), "device": str(r.device.type)}
    return seen


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


def _train(model, params_of, rank: int, device: str, steps: int = 3) -> list:
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    for _ in range(steps):
        x = torch.randn(6, 8, generator=g).to(device)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [_values(p) for p in params_of(model)]


def ddp(rank: int, world: int, device: str) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    model = _model().to(device)
    wrapped = DistributedDataParallel(model)
    return {"params": _train(wrapped, lambda m: m.module.parameters(), rank, device)}


def _sharded(device: str, world: int) -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device, (world,))
    model = _model().to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def fsdp2(rank: int, world: int, device: str) -> dict:
    model = _sharded(device, world)
    params = _train(model, lambda m: (p.full_tensor() for p in m.parameters()), rank, device)
    return {"params": params}


def checkpoint(rank: int, world: int, device: str, out_dir: str) -> dict:
    """Save an FSDP2 model's sharded state with torch.distributed.checkpoint, load it into
    a model whose weights were changed, and return both."""
    import torch.distributed.checkpoint as dcp

    model = _sharded(device, world)
    _train(model, lambda m: (p.full_tensor() for p in m.parameters()), rank, device, steps=1)
    saved = {k: _values(v.full_tensor()) for k, v in model.state_dict().items()}
    path = os.path.join(out_dir, f"ckpt-{device}")
    dcp.save(model.state_dict(), checkpoint_id=path)
    other = _sharded(device, world)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    state = other.state_dict()
    dcp.load(state, checkpoint_id=path)
    other.load_state_dict(state)
    loaded = {k: _values(v.full_tensor()) for k, v in other.state_dict().items()}
    return {"saved": saved, "loaded": loaded,
            "local_device": str(next(other.parameters()).to_local().device.type)}


def failure(rank: int, world: int, device: str, kind: str) -> dict:
    """Rank 0 runs an all_reduce its peer never joins: the peer waits, alive, until rank 0
    has seen the timeout ("timeout"), or has exited ("dead_peer"). Returns the exception
    rank 0 got."""
    store = dist.distributed_c10d._get_default_store()  # apart from gloo's connections
    if rank != 0:
        if kind == "dead_peer":
            os._exit(0)
        try:
            store.wait(["failure_seen"], datetime.timedelta(seconds=300))
        except dist.DistError:
            pass  # rank 0, which hosts the store, saw the failure and exited first
        return {}
    if kind == "dead_peer":
        time.sleep(2)  # the peer is gone
    x = torch.ones(4, device=device)
    try:
        dist.all_reduce(x)
    except Exception as e:  # noqa: BLE001  (what torch raises is the result)
        return {"type": f"{type(e).__module__}.{type(e).__qualname__}", "message": str(e)}
    finally:
        if kind == "timeout":
            store.set("failure_seen", "1")
    return {"type": None}


def main() -> None:
    scenario, rank, world, port, out_dir = sys.argv[1:6]
    backend = sys.argv[6] if len(sys.argv) > 6 else "gloo"
    rank, world = int(rank), int(world)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    timeout = datetime.timedelta(seconds=4 if scenario.startswith(("timeout", "dead_peer")) else 120)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    if scenario in ("collectives", "ddp", "fsdp2"):
        steps = globals()[scenario]
        result = {device: steps(rank, world, device) for device in ("cpu", "eagerc")}
    elif scenario == "checkpoint":
        result = checkpoint(rank, world, "eagerc", out_dir)
    else:  # "timeout:<device>" or "dead_peer:<device>"
        kind, device = scenario.split(":")
        result = failure(rank, world, device, kind)
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(result, f)
    if not scenario.startswith(("timeout", "dead_peer")):
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # a failed group's threads may not join; the result is written


if __name__ == "__main__":
    main()
