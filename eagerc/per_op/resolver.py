"""The op miss path, called from C++ (csrc/resolver_bridge.cpp) with the GIL held, once
per miss: it returns one explicit answer (`_C.MissAnswer`: a kernel, the host aliases, a
fallback to the device's own kernel, an interim kernel while the compile service compiles,
or eager's error).

One pass, driven from here; the miss is one value (eagerc/per_op/miss.py) built at its
start, and every step is one call into a module that returns, none calling back into this
one::

    MissRequest -> the device's target (eagerc/targets.py) -> Miss
      -> background mode: what became of the signature's job (eagerc/per_op/background.py):
         compiling -> interim (looked up by the request, before the Miss is built); else
         service().get(key) -> the kernel; new -> queued at the compile service
         (eagerc/compile_service/) -> interim
      -> with service().locked(key): service().get(key)          (eagerc/cache.py)
      -> eager's check, run once per call (eagerc/per_op/eager_rules.py)
      -> compile_op(miss) (eagerc/compile/op.py)
      -> service().put(key, artifact) stores and loads it, or service().refuse(key, refusal)
      -> the answer: the kernel, or the refusal's own (eagerc/refusals.py). A refusal that
         asks for scalar values sends the same call on, in this pass, under its signature
         with values (`request.with_values`); C++ keys the op by values from then on.

Nothing here looks at a dispatch key to decide anything: the device's target does.
"""
from __future__ import annotations

import torch

import _eagerc as _C
from eagerc import _stats, random_streams
from eagerc.aten_meta import overload_by_name
from eagerc.cache import CacheKey, service
from eagerc.per_op import background
from eagerc.per_op.eager_rules import check_devices
from eagerc.per_op.miss import EagerVerdict, Miss
from eagerc.refusals import NOWHERE, CompileError, EagerRaises, NotCompiled, SpecializeValues
from eagerc.targets import TargetError, for_served


def _context_is_unusual() -> bool:
    """A dispatch mode or no_dispatch is active on this thread (e.g. Dynamo cloning inputs
    under no_dispatch): tracing cannot run there, and its failure would say nothing about
    the signature."""
    return (torch._C._len_torch_dispatch_stack() > 0
            or torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python))


def resolve(request) -> "_C.MissAnswer":
    """The one answer to one L1 miss (a `_C.MissRequest`)."""
    try:
        target = for_served(request.dispatch_key)
    except TargetError as e:
        # A property of the device, not of this call: remembered, so the signature's next
        # call falls back in C++ without entering Python.
        return _C.MissAnswer.fallback(str(e), True)
    if background.jobs().waiting(request) and not _context_is_unusual():
        return _C.MissAnswer.interim()  # its job is still compiling: nothing else to look at
    if target.new_device:
        # Eager's device rule before any answer: an interim answer runs the home's kernel
        # on aliases, where a CPU tensor among the device's raises nothing (torch.add of a
        # CPU and an eagerc tensor must raise, as on CUDA). A call that fails it is never
        # queued, so it never reaches the shortcut above.
        try:
            check_devices(overload_by_name(request.op_name), request.args, target)
        except EagerRaises as e:
            return e.answer()
    miss = _start(request, target)
    try:
        return _answer(miss)
    except SpecializeValues as refusal:
        # The lifted scalars did not trace (now, recorded, or in the compile service's
        # replay): the same call under its signature with values, in this pass. The answer
        # is that signature's, whatever it is: C++ keys the op by values from now on.
        if request.with_values is None:  # a call C++ cannot key by its values
            return refusal.answer().with_scalar_values()
        try:
            answer = _answer(_start(request.with_values, target, same_call=miss))
        except SpecializeValues as again:  # no scalar is lifted there: not expected
            answer = again.answer()
        return answer.with_scalar_values()


def _start(request, target, same_call: Miss | None = None) -> Miss:
    """The miss of `request`'s signature; `same_call`: the call's miss under its other
    signature (op, context and eager's verdict are the call's, shared)."""
    op = same_call.op if same_call else overload_by_name(request.op_name)
    transient = same_call.transient if same_call else _context_is_unusual()
    miss = Miss(request=request, op=op, args=request.args, layout=request.layout,
                parallel=request.parallel, target=target,
                key=CacheKey("op", target, request.op_name, request.key),
                variants=frozenset(request.known_variants),
                verdict=same_call.verdict if same_call else EagerVerdict(op, request.args, target),
                transient=transient, job=None, stat_key=f"{request.op_name}@{request.dispatch_key}")
    miss.job = background.job_for(miss)  # None: compiled now, here
    return miss


def _answer(miss: Miss) -> "_C.MissAnswer":
    """The answer for `miss`'s signature. Raises SpecializeValues (the caller goes on with
    the call's values)."""
    try:
        if miss.job is not None:
            meanwhile = _stored_or_interim(miss)
            if meanwhile is not None:
                return meanwhile
        return _kernel(miss)
    except SpecializeValues:
        raise
    except NotCompiled as refusal:
        if isinstance(refusal, CompileError) and miss.target.new_device and not miss.transient \
                and not miss.verdict.ran:
            # A recorded refusal raises NotImplementedError on a device with no kernels
            # of its own; a call that eager rejects must still get eager's error.
            try:
                miss.verdict.check()
            except EagerRaises as e:
                refusal = e
        return refusal.answer()


def _stored_or_interim(miss: Miss):
    """In background mode: the interim answer while the compile service compiles the
    signature (or once the miss is queued there), else the stored kernel; None when this
    process compiles it now (the service failed the job). Raises a refusal recorded for
    the key. No lock: the service's worker may hold the key's, and this call must not wait
    for it."""
    jobs = background.jobs()
    state = jobs.state(miss.job)
    if state == background.WAITING:
        return _C.MissAnswer.interim()  # still compiling: no store lookup per call
    if state == background.FAILED:
        return None
    if state == background.SPECIALIZE:
        raise SpecializeValues("the compile service's replay compiled the call with its "
                               "scalar values")
    kernel, passed_over = _stored_variant(miss)
    if kernel is not None:
        if state == background.FINISHED:
            _stats.count(miss.stat_key, "background_compiles")
        return _C.MissAnswer.kernel(kernel, passed_over)
    if state == background.FINISHED:
        jobs.give_up(miss.job)  # finished, yet not in the store: compiled here
        return None
    if passed_over:
        # The key's stored kernels refuse this call: L1 takes them, and the next call,
        # whose job names them, asks the service for one that fits.
        return _C.MissAnswer.interim(passed_over)
    return _C.MissAnswer.interim() if jobs.submit(miss) else None


def _stored_variant(miss: Miss) -> tuple:
    """(the first stored variant whose guard passes for the call, or None; the variants
    loaded on the way whose guards do not: L1 takes them too)."""
    skip, passed_over = set(miss.variants), []
    while (hit := service().get(miss.key, miss.stat_key, frozenset(skip))) is not None:
        if miss.admits(hit.kernel):
            return hit.kernel, passed_over
        skip.add(hit.entry.variant_id)
        passed_over.append(hit.kernel)
    return None, passed_over


def _kernel(miss: Miss) -> "_C.MissAnswer":
    """The answer with the loaded kernel of the miss's key: stored, or checked, compiled
    and stored now. Raises the refusal (recorded, or what this pass met)."""
    svc = service()
    with svc.locked(miss.key):
        kernel, passed_over = _stored_variant(miss)
        if kernel is not None:
            return _C.MissAnswer.kernel(kernel, passed_over)
        try:
            if miss.transient:
                # Tracing needs the Python dispatcher: a stored kernel may serve this call,
                # but none is compiled here (the next call in a plain context compiles it).
                raise CompileError("called inside a dispatch mode or no_dispatch(); not "
                                   "compiled there", NOWHERE)
            # Eager's check and the compile leave the caller's random streams as they
            # were (both may draw from them), so a first call follows torch.manual_seed.
            with random_streams.kept():
                # A user error is eager's to report, and says nothing about the signature.
                miss.verdict.check()
                # Imported here: a process whose kernels are all stored never loads the compiler.
                from eagerc.compile import op as op_compiler

                artifact = op_compiler.compile_op(miss)
        except NotCompiled as refusal:
            svc.refuse(miss.key, refusal)
            raise
        return _C.MissAnswer.kernel(svc.put(miss.key, miss.stat_key, artifact).kernel, passed_over)
