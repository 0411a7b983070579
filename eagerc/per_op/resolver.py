"""The op miss path, called from C++ (csrc/resolver_bridge.cpp) with the GIL held.

One pass, driven from here; every step is one call into a module that returns, and none
calls back into this one::

    MissRequest -> the device's target (eagerc/targets.py)
      -> background mode: what became of the signature's job (eagerc/per_op/background.py):
         compiling -> interim; else service().get(key) -> the kernel; new -> queued at
         the compile service (eagerc/compile_service/) -> interim
      -> with service().locked(key): service().get(key)          (eagerc/cache.py)
      -> eager's check, run once per miss (eagerc/per_op/eager_rules.py)
      -> compile_op (eagerc/compile/op.py)
      -> service().put(key, artifact) stores and loads it, or service().refuse(key, refusal)
      -> a typed MissAnswer back to C++, which inserts the kernel into L1.

Nothing here looks at a dispatch key to decide anything: the device's target does.
"""
from __future__ import annotations

import torch

from eagerc import _C, _stats, random_streams
from eagerc.aten_meta import overload_by_name
from eagerc.cache import CacheKey, service
from eagerc.per_op import background
from eagerc.per_op.eager_rules import check_call
from eagerc.refusals import (NOWHERE, CompileError, EagerRaises, NeedsHostAliases, NotCompiled,
                             SpecializeValues)
from eagerc.targets import TargetError, for_device, served_device

# What each refusal answers (the first class of the refusal's MRO found here).
_ANSWERS = {
    NeedsHostAliases: lambda r: _C.MissAnswer.run_on_host_aliases(),
    SpecializeValues: lambda r: _C.MissAnswer.specialize_values(),
    EagerRaises: lambda r: _C.MissAnswer.raise_error(r.kind, r.message),
    # Remembered in L1 unless the caller's context caused it (a dispatch mode).
    CompileError: lambda r: _C.MissAnswer.fallback(str(r), r.remembered != NOWHERE),
}


def answer(refusal: NotCompiled) -> "_C.MissAnswer":
    """The MissAnswer for a refusal."""
    for kind in type(refusal).__mro__:
        if kind in _ANSWERS:
            return _ANSWERS[kind](refusal)
    return _C.MissAnswer.fallback(str(refusal), False)  # unknown: not a signature's property


def _context_is_unusual() -> bool:
    """A dispatch mode or no_dispatch is active on this thread (e.g. Dynamo cloning inputs
    under no_dispatch): tracing cannot run there, and its failure would say nothing about
    the signature."""
    return (torch._C._len_torch_dispatch_stack() > 0
            or torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python))


class _EagerVerdict:
    """Eager's check of one call, run at most once (memoized)."""

    def __init__(self, op, args, target):
        self._call = (op, args, target)
        self._raised: EagerRaises | None = None
        self.ran = False

    def check(self) -> None:
        """Raise EagerRaises when eager's kernel raises for the call."""
        if not self.ran:
            self.ran = True
            try:
                check_call(*self._call)
            except EagerRaises as e:
                self._raised = e
        if self._raised is not None:
            raise self._raised


def resolve(request) -> "_C.MissAnswer":
    """The answer to one L1 miss (a `_C.MissRequest`)."""
    try:
        target = for_device(served_device(request.dispatch_key))
    except TargetError as e:
        # A property of the device, not of this call: remembered, so the signature's next
        # call falls back in C++ without entering Python.
        return _C.MissAnswer.fallback(str(e), True)
    op = overload_by_name(request.op_name)
    stat_key = f"{request.op_name}@{request.dispatch_key}"
    transient = _context_is_unusual()
    job = background.job_for(request, target, op, transient)  # None: compiled now, here
    state = background.jobs().state(job) if job is not None else None
    if state == background.WAITING:
        return _C.MissAnswer.interim()  # still compiling: no store lookup per call
    key = CacheKey("op", target, request.op_name, request.key)
    verdict = _EagerVerdict(op, request.args, target)
    try:
        if job is not None:
            meanwhile = _stored_or_interim(job, state, request, target, key, stat_key)
            if meanwhile is not None:
                return meanwhile
        return _C.MissAnswer.kernel(_kernel(op, request.args, request.layout, request.parallel,
                                            target, key, stat_key, request.known_variants,
                                            verdict, transient))
    except NotCompiled as refusal:
        if isinstance(refusal, CompileError) and target.new_device and not transient \
                and not verdict.ran:
            # A recorded refusal raises NotImplementedError on a device with no kernels
            # of its own; a call that eager rejects must still get eager's error.
            try:
                verdict.check()
            except EagerRaises as e:
                refusal = e
        return answer(refusal)


def _stored_or_interim(job, state, request, target, key, stat_key):
    """In background mode, for a job that is not `background.WAITING`: the stored kernel,
    or the interim answer once the miss is queued at the compile service; None when this
    process compiles it now (the service failed the job). Raises a refusal recorded for
    the key. No lock: the service's worker may hold the key's, and this call must not wait
    for it."""
    jobs = background.jobs()
    if state == background.FAILED:
        return None
    if state == background.SPECIALIZE:
        return _C.MissAnswer.specialize_values()
    hit = service().get(key, stat_key, frozenset(request.known_variants))
    if hit is not None:
        if state == background.FINISHED:
            _stats.count(stat_key, "background_compiles")
        return _C.MissAnswer.kernel(hit.kernel)
    if state == background.FINISHED:
        jobs.give_up(job)  # finished, yet not in the store: compiled here
        return None
    return _C.MissAnswer.interim() if jobs.submit(job, request, target, key) else None


def _kernel(op, args, layout, parallel, target, key, stat_key, known_variants, verdict,
            transient=False):
    """The loaded kernel of `key`: stored, or checked, compiled and stored now. Raises the
    refusal (recorded, or what this pass met)."""
    svc = service()
    with svc.locked(key):
        hit = svc.get(key, stat_key, frozenset(known_variants))
        if hit is not None:
            return hit.kernel
        try:
            if transient:
                # Tracing needs the Python dispatcher: a stored kernel may serve this call,
                # but none is compiled here (the next call in a plain context compiles it).
                raise CompileError("called inside a dispatch mode or no_dispatch(); not "
                                   "compiled there", NOWHERE)
            # Eager's check and the compile leave the caller's random streams as they
            # were (both may draw from them), so a first call follows torch.manual_seed.
            with random_streams.kept():
                # A user error is eager's to report, and says nothing about the signature.
                verdict.check()
                # Imported here: a process whose kernels are all stored never loads the compiler.
                from eagerc.compile import op as op_compiler

                artifact = op_compiler.compile_op(op, args, layout, target, parallel)
        except NotCompiled as refusal:
            svc.refuse(key, refusal)
            raise
        return svc.put(key, stat_key, artifact).kernel
