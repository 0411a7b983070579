"""warm_cache: compile every kernel a model needs before its first real run.

1. Discover (eagerc/warm/discover.py): the model runs on fake tensors, no kernel runs; a
   dispatch mode records each call that reaches the device.
2. Replay (eagerc/warm/replay_call.py): worker processes, one per core by default, replay the
   calls on small real tensors; the device's own dispatch compiles what is missing
   through the compile/cache service, which stores each kernel as it finishes (the
   service's per-key lock keeps two workers, or two processes warming the same model,
   from compiling one kernel twice).
3. A WarmReport says what was found, compiled, already cached, and what failed.

After ``warm_cache(model, x)``, ``model(x)`` (and inputs of other sizes with the same
ranks; sizes 0 and 1 are specialized) loads kernels from disk and compiles nothing.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time
import warnings
from typing import Any, Callable, Optional

import torch

from eagerc.warm.discover import discover
from eagerc.warm.report import WarmReport

log = logging.getLogger("eagerc")


def _device_of(model: torch.nn.Module, example_inputs: tuple) -> torch.device:
    for t in list(model.parameters()) + list(model.buffers()):
        return t.device
    flat, _ = torch.utils._pytree.tree_flatten(example_inputs)
    for t in flat:
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("cpu")


def _replay_here(calls, device_type: str, collect) -> None:
    from eagerc.per_op.background import compiling_now
    from eagerc.per_op.registration import enable
    from eagerc.warm.replay_call import replay

    if device_type != "eagerc":
        enable(device_type)
    with compiling_now(device_type):  # a replay compiles before it answers
        for call in calls:
            collect(replay(call))


def _replay_in_workers(calls, device_type: str, workers: int, collect) -> None:
    """Each of `workers` threads drives one worker process (eagerc/workers) through a
    shared queue of calls. A call that raises in its worker fails alone. A worker that
    dies (killed, out of memory) costs its current call, reported with the worker's last
    output; a new worker takes over the rest. The compile/cache service stores
    atomically, so what the dead worker was compiling leaves no entry behind. A worker
    that cannot start (importing eagerc failed, a bad setting) fails its call with its
    own error; while no worker has started, every call left fails with it too: the next
    worker would start the same way."""
    from eagerc.warm.replay_call import ReplayResult
    from eagerc.workers import WorkerDidNotStart, WorkerDied, WorkerFailed, WorkerProcess

    todo: queue.Queue = queue.Queue()
    for call in calls:
        todo.put(call)
    done: queue.Queue = queue.Queue()
    one_started = threading.Event()
    # A replay compiles before it answers: an interim answer would leave the kernel to
    # compile elsewhere, after the report.
    env = dict(os.environ, EAGERC_COMPILE="now")

    def fail_the_rest(reason: str) -> None:
        while True:
            try:
                done.put(ReplayResult(todo.get_nowait(), failures=[reason]))
            except queue.Empty:
                return

    def drive():
        worker = None
        try:
            while True:
                try:
                    call = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    if worker is None:
                        worker = WorkerProcess("eagerc.warm.compile_worker", device_type, env=env)
                        worker.start()
                        one_started.set()
                    done.put(worker.ask(call))
                except WorkerFailed as e:
                    done.put(ReplayResult(call, failures=[f"the replay failed in its worker: {e}"]))
                except (WorkerDidNotStart, WorkerDied) as e:
                    done.put(ReplayResult(call, failures=[str(e)]))
                    worker.kill()
                    worker = None
                    if isinstance(e, WorkerDidNotStart) and not one_started.is_set():
                        fail_the_rest(str(e))
                        return
                except Exception as e:  # noqa: BLE001 - no worker process (it could not be spawned)
                    done.put(ReplayResult(call, failures=[f"no worker: {type(e).__name__}: {e}"]))
                    if worker is not None:
                        worker.kill()
                    worker = None
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=drive, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for _ in range(len(calls)):
        collect(done.get())
    for t in threads:
        t.join()


def _replay_on_cluster(calls, device_type: str, address: str, workers: int | None, collect) -> None:
    """The calls as tasks of a Ray cluster (eagerc/_cluster.py): each worker compiles into
    the shared tier the driver's EAGERC_REMOTE_CACHE names; a task whose worker or host is
    lost runs again elsewhere; one that fails is reported as a local worker's would be."""
    from eagerc import _cluster
    from eagerc.warm.replay_call import ReplayResult
    from eagerc.warm.compile_worker import replay_task

    _cluster.run(replay_task, [(call, device_type) for call in calls], address=address,
                 workers=workers, env=cluster_env(),
                 on_result=lambda task, result: collect(result),
                 on_failure=lambda task, why: collect(ReplayResult(task[0], failures=[
                     f"the cluster task failed: {why}"])))


def cluster_env() -> dict:
    """The farm workers' environment: the driver's eagerc and Inductor settings, and its
    thread count. Ray starts its workers with OMP_NUM_THREADS=1, under which Inductor
    plans a parallel kernel as a serial loop; with the driver's count it plans the
    parallel loops the parallel size class is for (their thread count is taken at run
    time, compile/op.py)."""
    from eagerc import _cluster

    env = _cluster.settings()
    env.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    env["EAGERC_COMPILE"] = "now"  # a task compiles before it answers, as a local worker does
    return env


def _progress(total: int):
    """A tqdm bar on a terminal, else about ten plain log lines (eagerc/_console.py)."""
    from eagerc import _console

    return _console.progress(total, desc="eagerc warm", unit="calls",
                             every=max(1, total // 10), leave=False)


def warm_cache(model: torch.nn.Module, *example_inputs, device: Optional[str] = None,
               train: bool = False, workers: Optional[int] = None,
               optimizer: Optional[Callable[[list], Any]] = None,
               confirm: bool = False, cluster: Optional[str] = None) -> WarmReport:
    """Compile, ahead of time, the kernels `model(*example_inputs)` needs on `device`.

    `device`: where the model will run (default: where its parameters, else its inputs,
    are); the model and inputs may sit elsewhere (only their metadata is used).
    `train`: also the backward of a scalar loss and a step of `optimizer(params)`
    (default SGD). `workers`: compile processes (default one per core; 0 compiles in
    this process). `confirm`: afterwards run the model's forward once for real (with
    and without grad), compiling here what fake tensors could not reach: code that
    branches on data, or on whether it is being traced (transformers skips its
    attention-mask shortcuts under fake tensors); costs one forward's memory and time.
    `cluster`: compile on a Ray cluster instead of local processes ("auto": the cluster
    this machine belongs to; "ray://head:10001"; "local": a new one here); `workers` then
    caps the tasks in flight (default: the cluster's CPUs). Set EAGERC_REMOTE_CACHE so the
    kernels reach every host (docs/fleet.md).
    """
    start = time.perf_counter()
    target = torch.device(device) if device is not None else _device_of(model, example_inputs)
    if cluster is None:
        workers = (os.cpu_count() or 1) if workers is None else int(workers)
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    from eagerc import _console

    with _console.heartbeat(lambda: "eagerc warm: running the model on fake tensors to find its calls"):
        calls, stopped = discover(model, tuple(example_inputs), target, train, optimizer)
    log.info("eagerc warm: %d calls to replay (%d distinct ops)", len(calls), len({c.op for c in calls}))
    if stopped:
        warnings.warn(f"eagerc.warm_cache: discovery stopped early, {stopped}; the calls after "
                      "that point are not warmed (report.discovery_stopped)", RuntimeWarning,
                      stacklevel=2)
    report = WarmReport(device=str(target), ops_found=len({c.op for c in calls}), calls=len(calls),
                        discovery_stopped=stopped, cluster=cluster,
                        workers=min(workers if workers is not None else len(calls), len(calls)))
    bar = _progress(len(calls))
    in_process = cluster is None and report.workers == 0
    started = {"done": 0, "last": ""}

    def collect(result):
        if not in_process:  # a worker's compiles, shown here as they finish (in-process ones log directly)
            for line in result.compile_lines:
                log.info("%s", line)
        started["done"] += 1
        started["last"] = result.call.op
        report.compiled += result.compiled
        if result.failures:
            report.failed += [(result.call.op, result.call.describe(), r) for r in result.failures]
        elif result.compiled == 0:
            report.cached += 1
        if bar is not None:
            bar.set_postfix_str(result.call.op, refresh=False)
            bar.update(1)

    def status() -> str:
        if started["done"] == 0 and not in_process:
            return (f"eagerc warm: {report.workers} worker processes starting (each imports torch and "
                    f"eagerc) and compiling their first calls; 0/{len(calls)} calls done")
        return (f"eagerc warm: {started['done']}/{len(calls)} calls done, still compiling"
                + (f" (last done: {started['last']})" if started["last"] else ""))

    try:
        with _console.heartbeat(status):
            if cluster is not None:
                _replay_on_cluster(calls, target.type, cluster, workers, collect)
            elif in_process:
                _replay_here(calls, target.type, collect)
            else:
                _replay_in_workers(calls, target.type, report.workers, collect)
    finally:
        if bar is not None:
            bar.close()
    if confirm:
        report.compiled_on_confirm = _confirm(model, example_inputs, target.type)
    report.seconds = time.perf_counter() - start
    return report


def _confirm(model, example_inputs, device_type: str) -> int:
    """Kernels compiled by one real forward (with and without grad) after the replay."""
    from eagerc.per_op.background import compiling_now
    from eagerc.per_op.registration import enable, stats

    if device_type != "eagerc":
        enable(device_type)
    before = stats()["compiles"]
    with compiling_now(device_type):
        with torch.no_grad():
            model(*example_inputs)
        grads = {p: p.grad for p in model.parameters()}
        model(*example_inputs)  # no backward: the graph is dropped, the weights untouched
        for p, g in grads.items():
            p.grad = g
    return stats()["compiles"] - before


__all__ = ["warm_cache", "WarmReport"]
