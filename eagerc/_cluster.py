"""Tasks spread over a Ray cluster: the compile farm that warm_cache and the coverage
sweep use instead of their local worker processes (``cluster="auto"``, ``"ray://..."``).

Ray schedules each task on a worker process of some host, retries a task whose worker or
host is lost (``max_retries``), and hands results back as they finish. The driver's
eagerc settings (``EAGERC_*`` variables: the shared Redis tier, the compile mode) travel
with the tasks, so a worker on any host compiles into, and loads from, the same shared
tier: every host then loads each kernel, none recompiles it.

    >>> from eagerc import _cluster
    >>> _cluster.settings({"EAGERC_REMOTE_CACHE": "redis://h:6379/0", "HOME": "/root"})
    {'EAGERC_REMOTE_CACHE': 'redis://h:6379/0'}
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Iterable

from eagerc import _config

log = logging.getLogger("eagerc")

# What the workers must see as the driver does (names beginning with these).
_FORWARDED = ("EAGERC_", "TORCHINDUCTOR_", "OMP_NUM_THREADS")


class ClusterError(RuntimeError):
    """The cluster cannot be reached, or Ray is not installed."""


def settings(environ: dict | None = None) -> dict:
    """The environment variables a worker needs from the driver (eagerc's, Inductor's)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith(_FORWARDED)}


def connect(address: str):
    """The ``ray`` module, connected to the cluster at ``address`` ("auto": the one this
    machine belongs to, started with ``ray start``; "ray://host:10001": a remote one
    through Ray Client; "local": a new one-machine cluster). A process already connected
    keeps its connection."""
    try:
        import ray
    except ImportError:
        raise ClusterError("a compile farm on a cluster needs Ray: pip install 'eagerc[ray]' "
                           "(or pip install ray)") from None
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, log_to_driver=False,
                     ignore_reinit_error=True)
        except (ConnectionError, RuntimeError) as e:
            raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {str(e).rstrip('.')}. "
                               "Start one with "
                               "`ray start --head` (address 'auto'), or pass 'local'.") from None
    if not _config.remote_cache_set() and len(ray.nodes()) > 1:
        log.warning("eagerc: the cluster has %d hosts and EAGERC_REMOTE_CACHE is not set: kernels "
                    "compiled on the other hosts stay there", len(ray.nodes()))
    return ray


def run(fn: Callable[[Any], Any], tasks: Iterable, *, address: str,
        on_result: Callable[[Any, Any], None], on_failure: Callable[[Any, str], None],
        workers: int | None = None, max_retries: int = 3, timeout: float | None = None,
        env: dict | None = None) -> None:
    """Run ``fn(task)`` for each task on the cluster; call ``on_result(task, result)`` or
    ``on_failure(task, reason)`` in this thread as each ends, in the order they end.

    ``workers``: tasks in flight at once (default: the cluster's CPUs). ``max_retries``:
    how often a task whose worker process or host died is run again elsewhere (a task
    that raises is not retried: the exception is its result). ``timeout``: seconds from a
    task's submission (a new worker's start included) until its worker is killed and it
    fails. ``env``: the workers' environment variables (default: ``settings()``)."""
    ray = connect(address)
    env = settings() if env is None else env
    remote = ray.remote(fn).options(num_cpus=1, max_retries=max_retries, retry_exceptions=False,
                                    runtime_env={"env_vars": env} if env else None)
    pending = list(tasks)
    pending.reverse()  # pop() takes them in order
    limit = max(1, workers or int(ray.cluster_resources().get("CPU", 1)))
    in_flight: dict = {}  # ObjectRef -> (task, started)
    while pending or in_flight:
        while pending and len(in_flight) < limit:
            task = pending.pop()
            in_flight[remote.remote(task)] = (task, time.monotonic())
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
        for ref in ready:
            task, _started = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a task's failure is its result
                on_failure(task, _reason(e))
            else:
                on_result(task, result)
        if timeout is not None:
            now = time.monotonic()
            for ref, (task, started) in list(in_flight.items()):
                if now - started > timeout:
                    ray.cancel(ref, force=True)  # kills the worker process running it
                    del in_flight[ref]
                    on_failure(task, f"timeout: no answer in {timeout:g} s")


def _reason(error: Exception) -> str:
    """One line: a task's own exception as ``Type: message``; a lost worker as Ray says."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, Exception):
        error = cause
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
