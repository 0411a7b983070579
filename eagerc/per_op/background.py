"""Background compilation (the default): a miss is answered at once, and its kernel is
compiled out of the caller's way, by the compile service (eagerc/compile_service/).

A call whose kernel is neither in L1 nor in a store is served by a kernel that exists
(csrc/kernel_holder.cpp, ``run_interim``):

- override mode (cpu, cuda): the device's own kernel;
- a device whose memory has a home (the eagerc device: host or CUDA memory): the home's
  ATen kernel on zero-copy aliases;
- a device with no home (a vendor's; or aliases off, EAGERC_ALIAS_FALLBACK=0): the host
  round trip (with it off too, EAGERC_CPU_FALLBACK=0, the miss compiles now).

Such calls count as ``interim`` in ``eagerc.stats()``. The miss's description (op,
arguments' metadata, size class) goes to the compile service, a process of its own with
worker processes that compile it into the persistent kernel cache: the caller's GIL is
never held by a compile, and a compile queued by a process that exits still reaches the
cache. A signature served in the interim is called again: while its job is queued or
compiling it is answered in the interim again, by one look-up keyed by the call's request
(:meth:`Jobs.waiting`: no key or miss is built) and a look at the service's finished jobs
at most every ``client.POLL_S``; once the job is done, the kernel is loaded from the store
(counted as ``background_compiles``) and goes into L1. Nothing calls back into the miss
path: this module only says what became of a job.

A job the service could not finish (its worker died, the replay did not reach the
signature, the service does not run) is compiled in the caller's process at the
signature's next miss, as in "now" mode, with the call's real arguments: never wrong, and
the service still takes the process's other misses.

Random ops are not deferred (but for attention called with ``dropout_p=0``, which draws
nothing): they compile on the caller's thread at their first call, so their numbers
follow torch.manual_seed whatever the timing. ``compile="now"`` (or
``EAGERC_COMPILE=now``) makes every miss wait for its compile, in the caller's process.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time


from eagerc import _config, random_streams
from eagerc.compile_service import call as call_description
from eagerc.compile_service.client import client, folder_for
from eagerc.compile_service.spool import SPECIALIZE_VALUES
from eagerc.kernel_key import HOME_GAP_PREFIX

log = logging.getLogger("eagerc")

_modes: dict = {}          # device -> "now" | "background" (set by enable)

# What became of a signature's job, as the miss path asks.
NEW = "new"              # none queued by this process
WAITING = "waiting"      # queued or compiling: answer in the interim
FINISHED = "finished"    # the store holds its kernel (or a refusal recorded for it)
FAILED = "failed"        # compiled in this process from now on
SPECIALIZE = "specialize_values"  # lifted scalars did not trace: ask with their values


def set_mode(device: str, mode) -> None:
    if mode is None:
        _modes.pop(device, None)
        return
    if mode not in _config.COMPILE_MODES:
        raise ValueError(f"compile={mode!r}: expected 'background' or 'now'")
    _modes[device] = mode


@contextlib.contextmanager
def compiling_now(device: str):
    """Misses on `device` compile before they answer inside the block, whatever the mode:
    for code whose job is to compile (warm_cache's replays and its confirming forward),
    where an interim answer would leave the kernel to be compiled after the report."""
    before = _modes.get(device)
    _modes[device] = "now"
    try:
        yield
    finally:
        set_mode(device, before)


def is_background(device: str) -> bool:
    mode = _modes.get(device)
    return (mode or _config.compile_mode()) == "background"


def job_for(miss):
    """This process's name for the job of `miss` (a eagerc.per_op.miss.Miss, its `job` not
    yet set), or None when the miss is compiled now: compile="now", a random op, a call
    inside a dispatch mode, or a device with no kernel to serve it meanwhile (no home to
    alias, and the host round trip off; an op that neither the home nor the CPU has a
    kernel for)."""
    target = miss.target
    if miss.transient or not is_background(target.device):
        return None
    if random_streams.draws(miss.op) and not _draws_nothing(miss.op, miss.args):
        return None
    home = target.host_aliases and _config.alias_fallback_enabled()
    if target.new_device and not home and not _config.cpu_fallback_enabled():
        return None
    if miss.key.name.startswith(HOME_GAP_PREFIX):
        # Only such ops can be home gaps: any other miss is answered without importing the
        # decompositions (Inductor, sympy: a tenth of a CPU second on a caller's first miss,
        # in a process that may never compile).
        from eagerc.compile.accelerator.decompositions import for_home_gaps

        if miss.op in for_home_gaps(target.home):
            return None  # neither the home nor the round trip has a kernel to run meanwhile
    # The kernel cache as named (a job of another cache is not this one's); read as set,
    # not resolved: Jobs.waiting reads it on every call answered in the interim. Imported
    # here, not at the top: `import eagerc` does not load the storage tier (kernel_cache
    # imports its disk and Redis stores, diskcache and sqlite3), which a program may never
    # need; Jobs.waiting has no job to look up before this has run.
    global _cache_dir_variable
    from kernel_cache.layout import ENV_DIR

    _cache_dir_variable = ENV_DIR
    return _job_name(miss.request)


_cache_dir_variable = ""  # kernel_cache's variable, once job_for has imported it


def _job_name(request) -> tuple:
    """The job's name from the request alone (its op, dispatch key, signature, whether it
    is keyed by values, the variants L1 holds) and the kernel cache as named: what
    job_for names a background miss, and what Jobs.waiting looks up before any miss is
    built."""
    variants = request.known_variants
    return (os.environ.get(_cache_dir_variable), request.op_name, request.dispatch_key,
            request.key, request.specialize_values, frozenset(variants) if variants else _NONE)


_NONE = frozenset()


def _draws_nothing(op, args) -> bool:
    """A seeded op called so that it draws nothing (attention with dropout_p=0: ATen's
    kernel and a compiled one alike), so which of them serves it changes no number."""
    for argument, value in zip(op._schema.arguments, args):
        if argument.name == "dropout_p":
            return isinstance(value, (int, float)) and value == 0
    return False


class Jobs:
    """The jobs this process queued, by its name for them (:func:`job_for`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queued: dict = {}    # name -> (service folder, job id, device)
        self._given_up: set = set()

    def waiting(self, request) -> bool:
        """Whether the signature of `request` (a `_C.MissRequest`) has a job this process
        queued that is still queued or compiling, its device still in background mode:
        its call is then answered in the interim, with nothing else looked at. A call of
        a pending signature costs this look-up and, at most every ``client.POLL_S``, one
        listing of the service's finished jobs; the first call after its job finished
        gets False and goes down the miss path, which takes the kernel."""
        if not self._queued:
            return False  # no job pending: one test per miss
        queued = self._queued.get(_job_name(request))
        if queued is None or not is_background(queued[2]):
            return False
        return client().outcome(queued[0], queued[1]) is None

    def state(self, name) -> str:
        with self._lock:
            if name in self._given_up:
                return FAILED
            queued = self._queued.get(name)
        if queued is None:
            return NEW
        outcome = client().outcome(queued[0], queued[1])
        if outcome is None:
            return WAITING
        specialize = outcome.get("why") == SPECIALIZE_VALUES
        with self._lock:
            self._queued.pop(name, None)
            if not outcome.get("ok") and not specialize:
                self._given_up.add(name)
        if outcome.get("ok"):
            return FINISHED
        if specialize:
            return SPECIALIZE
        log.info("eagerc: the compile service did not compile %s (%s); compiling it here",
                 name[1], outcome.get("why", ""))
        return FAILED

    def submit(self, miss) -> bool:
        """Queue `miss` (its job named by :func:`job_for`) at the service; False (and
        compiled here from now on) when it cannot be described or the service cannot be
        reached."""
        name = miss.job
        described = call_description.describe(miss.key.name, miss.args, miss.parallel,
                                              miss.key.signature,
                                              miss.request.specialize_values, miss.variants,
                                              miss.target)
        data = described.to_bytes() if described is not None else None
        queued = False
        if data is not None:
            # The service's folder names the settings the environment gives; one the caller
            # changed in-process (an Inductor setting) puts the service's kernel where the
            # caller does not look: it then finds the job finished and compiles here.
            folder = folder_for(os.environ)
            # A call whose guards refuse the key's kernels the caller holds needs another
            # variant: another job.
            parts = [miss.key.entry_key(), *(v.encode() for v in described.known_variants)]
            job_id = hashlib.sha256(b"\0".join(parts)).hexdigest()[:32]
            queued = client().submit(folder, job_id, data)
        with self._lock:
            if queued:
                self._queued[name] = (folder, job_id, miss.target.device)
            else:
                self._given_up.add(name)
        return queued

    def give_up(self, name) -> None:
        with self._lock:
            self._given_up.add(name)

    def pending(self) -> int:
        with self._lock:
            return len(self._queued)

    def wait(self, timeout: float | None = None) -> bool:
        """Until every job this process queued has an outcome (True), or `timeout` seconds
        (False). The kernels are taken at each signature's next call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                queued = list(self._queued.items())
            waiting = [name for name, (folder, job_id, _) in queued
                       if client().outcome(folder, job_id) is None]
            if not waiting:
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)


_jobs = Jobs()


def jobs() -> Jobs:
    return _jobs
