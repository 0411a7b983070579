"""The op miss path, called from C++ (csrc/resolver_bridge.cpp) with the GIL held.

holder -> resolve(MissRequest) -> the compile/cache service (eagerc/cache.py), whose
compile step is the per-op compiler (eagerc/compile/op.py) -> a typed MissAnswer back to
C++, which inserts the loaded artifact into L1. Nothing here looks at a dispatch key to
decide anything: the device's target (eagerc/targets.py) does.
"""
from __future__ import annotations

import torch

from eagerc import _C, _stats
from eagerc.aten_meta import overload_by_name
from eagerc.cache import CacheKey, Compiled, Request, service
from eagerc.refusals import (NOWHERE, ON_DISK, CompileError, EagerRaises, NeedsHostAliases,
                                   SpecializeValues)
from eagerc.per_op import background
from eagerc.per_op.eager_rules import check_call
from eagerc.targets import TargetError, for_device, served_device


def _context_is_unusual() -> bool:
    """A dispatch mode or no_dispatch is active on this thread (e.g. Dynamo cloning inputs
    under no_dispatch): tracing cannot run there, and its failure would say nothing about
    the signature."""
    return (torch._C._len_torch_dispatch_stack() > 0
            or torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python))


def _compile(op, args, layout, target, parallel: bool) -> Compiled:
    from eagerc.compile.op import compile_op

    kernel = compile_op(op, args, layout, target, parallel)
    return Compiled(kernel.library, {"num_outputs": kernel.num_outputs, "guard": kernel.guard_source},
                    kernel.description, kernel.seconds)


def _load(entry):
    return _C._load_artifact(entry.variant_id, entry.artifact_path, int(entry.metadata["num_outputs"]))


def _background_job(op, args, layout, target, parallel: bool, key: CacheKey, stat_key: str, deferred_id):
    """The compile of one deferred miss, run on the background thread: True when the
    store then holds a kernel (loaded and kept for the key's next miss), or a refusal
    that is a property of the signature."""
    def job() -> bool:
        def compile_call() -> Compiled:
            check_call(op, args, target)
            return _compile(op, args, layout, target, parallel)

        _C._enter_activity()  # as inside a miss: ops the compile runs are native
        try:
            result = service().get(Request(key=key, stat_key=stat_key, load=_load,
                                           compile=compile_call, skip_variants=frozenset()))
        finally:
            _C._exit_activity()
        refusal = result.refusal
        if refusal is None:
            background.compiler().keep_ready(deferred_id, result.value)
        # A recorded answer (a kernel, "run on CPU aliases", or a signature's refusal)
        # serves the next miss from the store; anything else is decided in the foreground.
        return (refusal is None or isinstance(refusal, NeedsHostAliases)
                or getattr(refusal, "remembered", None) == ON_DISK)

    return job


def resolve(request) -> "_C.MissAnswer":
    """The answer to one L1 miss (a `_C.MissRequest`)."""
    try:
        target = for_device(served_device(request.dispatch_key))
    except TargetError as e:
        # A property of the device, not of this call: remembered, so the signature's next
        # call falls back in C++ without entering Python.
        return _C.MissAnswer.fallback(str(e), True)
    op = overload_by_name(request.op_name)
    args, layout = request.args, request.layout
    transient = _context_is_unusual()
    stat_key = f"{request.op_name}@{request.dispatch_key}"
    deferred_id = (stat_key, bytes(request.key), request.specialize_values)
    if background.compiler().is_pending(deferred_id):
        return _C.MissAnswer.interim()  # still compiling: no store lookup per call
    ready = background.compiler().take_ready(deferred_id, request.known_variants)
    if ready is not None:
        _stats.count(stat_key, "ready_on_miss")  # a hit for the caller (eagerc/per_op/background.py)
        return _C.MissAnswer.kernel(ready)
    eager_accepted = []  # set once compile_call has run eager on this call
    key = CacheKey("op", target, request.op_name, request.key)

    def compile_call() -> Compiled:
        if transient:
            # Tracing needs the Python dispatcher: a stored kernel may serve this call, but
            # none is compiled here (the next call in a plain context compiles it).
            raise CompileError("called inside a dispatch mode or no_dispatch(); not compiled there",
                               NOWHERE)
        if background.is_background(target.device):
            # Raises Deferred (served by an existing kernel now), unless the background
            # already failed for this key: then compiled here, with the real arguments.
            background.compiler().defer(
                deferred_id, stat_key,
                _background_job(op, background.snapshot_args(args), layout, target,
                                request.parallel, key, stat_key, deferred_id))
        # A user error is eager's to report, and says nothing about the signature.
        check_call(op, args, target)
        eager_accepted.append(True)
        return _compile(op, args, layout, target, request.parallel)

    result = service().get(Request(
        key=key, stat_key=stat_key,
        load=_load, compile=compile_call, skip_variants=frozenset(request.known_variants)))
    refusal = result.refusal
    if refusal is None:
        return _C.MissAnswer.kernel(result.value)
    if isinstance(refusal, background.Deferred):
        return _C.MissAnswer.interim()
    if isinstance(refusal, NeedsHostAliases):
        return _C.MissAnswer.run_on_host_aliases()
    if isinstance(refusal, SpecializeValues):
        return _C.MissAnswer.specialize_values()
    if isinstance(refusal, CompileError) and target.new_device and not transient \
            and not eager_accepted:
        # A recorded refusal raises NotImplementedError on a device with no kernels of its
        # own; a call that eager rejects must still get eager's error.
        try:
            check_call(op, args, target)
        except EagerRaises as e:
            refusal = e
    if isinstance(refusal, EagerRaises):
        return _C.MissAnswer.raise_error(refusal.kind, refusal.message)
    remember = not isinstance(refusal, CompileError) or refusal.remembered != NOWHERE
    return _C.MissAnswer.fallback(str(refusal), remember)
