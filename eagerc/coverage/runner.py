"""The sweep: static answers first, then every (overload, dtype) task in worker processes,
results appended to ``results.jsonl`` as they come (``resume`` skips what is there).

A worker that crashes (the task's record is ``crash``, with its exit status and the last
lines of its log) or runs past the per-task timeout (``timeout``; the worker is killed)
is replaced, and the run goes on. So is a worker whose GPU context a task left unusable
(a device-side assert: every later call in that process fails with it): the task keeps
its record, the next task gets a fresh process.
"""
from __future__ import annotations

import json
import os
import pickle
import queue
import threading
import time

import torch

from eagerc import _console
from eagerc.coverage import enumerate as enum
from eagerc.coverage.execute import CPU_STAGE
from eagerc.coverage.samples import Plan, record_opinfo
from eagerc.workers import WorkerDidNotStart, WorkerDied, WorkerFailed, WorkerProcess
from eagerc.workers.process import quote

RESULTS = "results.jsonl"


def static_record(facts: enum.OpFacts, dtype: str):
    """The record of an op that needs no run, or None."""
    if facts.composite_implicit:
        return {"op": facts.name, "dtype": dtype, "status": "decomposed",
                "detail": "CompositeImplicitAutograd: decomposes before reaching any device"}
    if not facts.has_cpu_kernel:
        return {"op": facts.name, "dtype": dtype, "status": "no_sample",
                "detail": "no CPU kernel: CPU eager cannot give a reference"}
    return None


def load_results(out_dir: str) -> dict:
    """(op, dtype) -> the last record for it in results.jsonl."""
    done = {}
    path = os.path.join(out_dir, RESULTS)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a killed run
                done[(r["op"], r["dtype"])] = r
    return done


def plan_for(dtype: str, grad: bool, wanted, out_dir: str, samples: int, log=print,
             show_progress: bool = True) -> Plan:
    """OpInfo calls for `dtype`, recorded once per output folder (plan-*.pkl)."""
    path = os.path.join(out_dir, f"plan-{dtype}{'-grad' if grad else ''}.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            plan = pickle.load(f)
        covers = plan.wanted is None or (wanted is not None and set(wanted) <= plan.wanted)
        if covers and getattr(plan, "limit", samples) >= samples:
            return plan
    def progress(entries):
        bar = _console.progress(len(entries), desc=f"coverage: OpInfo samples {dtype}", unit="entries",
                                every=max(1, len(entries) // 10), leave=False)
        for entry in entries:
            yield entry
            bar.update(1)
        bar.close()

    try:
        plan = record_opinfo(getattr(torch, dtype), grad, wanted=wanted, limit=samples,
                             progress=progress if show_progress else None)
    except ImportError as e:  # torch's test package (expecttest) missing
        log(f"coverage: OpInfo samples unavailable ({e}); schema samples only")
        plan = Plan(dtype, grad)
    plan.wanted = None if wanted is None else set(wanted)
    with open(path + ".tmp", "wb") as f:
        pickle.dump(plan, f)
    os.replace(path + ".tmp", path)
    return plan


def worker_env(device: str, out_dir: str, fresh_cache: bool) -> dict:
    env = dict(os.environ)
    env["EAGERC_COMPILE"] = "now"        # a status needs the op's own kernel, not an interim one
    env["EAGERC_CPU_FALLBACK"] = "1"     # an op that cannot compile runs on CPU, its reason counted
    env.setdefault("OMP_NUM_THREADS", "1")
    if device == "eagerc":
        env["EAGERC_DEVICE"] = "1"       # also where torch sees a GPU (eagerc/_config.py)
    if fresh_cache:
        env["EAGERC_CACHE_DIR"] = os.path.join(out_dir, "cache")
    return env


_cluster_check = None  # a compile farm worker's (device, handler), made on its first task


def cluster_task(job):
    """One (task, device) on a compile farm's worker (eagerc/_cluster.py): set up as a
    local worker sets itself up, once per process, then the task's record."""
    global _cluster_check
    task, device = job
    if _cluster_check is None or _cluster_check[0] != device:
        from eagerc.coverage import op_worker

        _cluster_check = (device, op_worker.start(device))
    try:
        return _cluster_check[1](task)
    except Exception as e:  # noqa: BLE001 - the tool's own failure on this op, reported
        return _error_record(task, type(e).__name__, str(e))


def _run_on_cluster(tasks: list, device: str, env: dict, workers: int, timeout: float,
                    address: str, write) -> None:
    """The tasks on a Ray cluster: a worker that dies on a task runs it once more
    elsewhere (a lost host), then the task is a crash; past `timeout` the worker is
    killed and the task is a timeout."""
    from eagerc import _cluster

    def failed(job, why: str):
        task = job[0]
        status = "timeout" if why.startswith("timeout") else "crash"
        write({**_head(task), "status": status, "detail": f"on the cluster: {why}"})

    _cluster.run(cluster_task, [(t, device) for t in tasks], address=address, workers=workers,
                 max_retries=1, timeout=timeout, env=_cluster.settings(env),
                 on_result=lambda job, record: write(record), on_failure=failed)


def run_tasks(tasks: list, device: str, out_dir: str, workers: int, timeout: float,
              fresh_cache: bool = False, progress: bool = True, cluster: str | None = None) -> None:
    """Run `tasks` on `workers` processes (or, with `cluster`, as tasks of that Ray
    cluster, `workers` at once), appending each record to results.jsonl."""
    if not tasks:
        return
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    env = worker_env(device, out_dir, fresh_cache)
    pending: queue.Queue = queue.Queue()
    for t in tasks:
        pending.put(t)
    lock = threading.Lock()
    results = open(os.path.join(out_dir, RESULTS), "a")
    bar = _console.progress(len(tasks), desc=f"coverage {device}", unit="tasks",
                            every=max(1, len(tasks) // 50)) if progress else None

    def write(record):
        for line in record.pop("compile_lines", None) or []:
            _console.log.info("%s (%s %s)", line, record.get("op"), record.get("dtype"))
        with lock:
            results.write(json.dumps(record) + "\n")
            results.flush()
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"{record['op']} {record['status']}"[:40])

    if cluster is not None:
        try:
            _run_on_cluster(tasks, device, env, workers, timeout, cluster, write)
        finally:
            results.close()
            if bar is not None:
                bar.close()
        return

    def serve(index: int):
        log_path = os.path.join(out_dir, "logs", f"worker-{index}.log")
        worker = None
        while True:
            try:
                task = pending.get_nowait()
            except queue.Empty:
                break
            if worker is None:
                worker = WorkerProcess("eagerc.coverage.op_worker", device, env=env, log_path=log_path)
                try:
                    worker.start(max(timeout, 300))
                except (WorkerDidNotStart, TimeoutError) as e:
                    how = worker.kill()
                    why = e if isinstance(e, WorkerDidNotStart) else f"{e} ({how}): {quote(worker.output)}"
                    worker = None
                    write({**_head(task), "status": "crash", "detail": f"worker did not start: {why}"})
                    continue
            start = time.monotonic()
            try:
                record = worker.ask(task, timeout)
            except TimeoutError:
                worker.kill()
                worker = None
                record = {**_head(task), "status": "timeout", "detail": f"no answer in {timeout:g} s"}
            except WorkerFailed as e:
                record = _error_record(task, e.type_name, e.message)
            except WorkerDied as e:
                worker.kill()
                worker = None
                record = _crash_record(task, e.how, quote(e.output))
            record.setdefault("seconds", round(time.monotonic() - start, 3))
            write(record)
            if worker is not None and unusable_context(record):
                worker.kill()
                worker = None
        if worker is not None:
            worker.close()

    threads = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.close()
    if bar is not None:
        bar.close()


# CUDA's sticky errors: once one is raised the process's context fails every later call.
_STICKY_GPU_ERRORS = ("device-side assert triggered", "an illegal memory access was encountered",
                      "unspecified launch failure", "misaligned address")


def unusable_context(record: dict) -> bool:
    """Whether the task's record reports an error that leaves its worker's GPU context
    unusable."""
    detail = record.get("detail") or ""
    return any(marker in detail for marker in _STICKY_GPU_ERRORS)


def _crash_record(task: dict, how: str, tail: str) -> dict:
    """A dead worker: the device's crash, unless the log says CPU eager was running (then
    there is no reference to compare with: no_sample)."""
    last = tail.rsplit(" | ", 1)[-1]
    if last.endswith(": " + CPU_STAGE):
        return {**_head(task), "status": "no_sample",
                "detail": f"CPU eager crashed the process ({how}) on {last.split(':', 1)[0]}"}
    return {**_head(task), "status": "crash", "detail": f"worker died ({how}): {tail}"}


def _error_record(task: dict, type_name: str, message: str) -> dict:
    """The tool's own failure on a task (the worker printed its traceback to its log)."""
    return {**_head(task), "status": "error",
            "detail": f"coverage could not check it: {type_name}: {message[:200]}"}


def _head(task: dict) -> dict:
    return {"op": task["op"], "dtype": task["dtype"]}
