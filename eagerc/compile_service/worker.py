"""What a compile service worker runs for one job: the call replayed on stand-ins, so the
device's own dispatch compiles the caller's signature into the kernel cache.

Runs in the service's worker processes (eagerc/compile_service/daemon.py), never in the
caller's. The worker compiles in "now" mode: it is the one that waits.
"""
from __future__ import annotations

import pickle

from eagerc.compile_service.spool import SPECIALIZE_VALUES
from eagerc.refusals import NotCompiled, error_summary


def compile_job(path: str) -> tuple:
    """(ok, why): ok when the store holds the caller's kernel, or a refusal recorded for
    its signature (that answers the caller too)."""
    with open(path, "rb") as f:
        call = pickle.load(f)
    import _eagerc as _C
    from eagerc import targets
    from eagerc.aten_meta import overload_by_name
    from eagerc.cache import CacheKey
    from eagerc.compile_service.call import split_by_schema, standin_args
    from eagerc.per_op.registration import enable

    target = targets.for_device(call.device)
    # The service starts its workers with EAGERC_COMPILE=now. A new device is served whole
    # since `import eagerc`; in override mode (cpu, cuda) the replayed op is served.
    if call.served_ops:
        enable(call.device, ops=list(call.served_ops), compile="now")
    key = CacheKey("op", target, call.op, call.signature)
    stat_key = f"{call.op}@service"
    if _stored(key, stat_key, call.known_variants):
        return True, ""
    op = overload_by_name(call.op)
    why = ""
    missed = _record_misses()
    try:
        positional, keywords = split_by_schema(op, standin_args(call))
        _C._force_size_class("P" if call.parallel else "S")
        try:
            op(*positional, **keywords)
        finally:
            _C._force_size_class("")
    except Exception as e:  # noqa: BLE001 - a call eager rejects on stand-ins: the caller decides
        why = error_summary(e)
    if _stored(key, stat_key, call.known_variants):
        return True, ""
    if any(name == call.op and ((k == call.signature and answered_with_values)
                                or (specialized and not call.specialized))
           for name, k, answered_with_values, specialized in missed):
        # The lifted scalars did not trace (now, or in an earlier job of this worker; not
        # recorded: it may be the machine's): the caller asks again with its scalar values
        # in the key, which the replay compiled.
        return False, SPECIALIZE_VALUES
    if why:
        return False, f"{call.op}: {why}"
    others = [k.hex() for name, k, _, _ in missed if name == call.op and k != call.signature]
    return False, (f"{call.op}: the replay did not reach the caller's signature {call.signature.hex()}"
                   + (f" (it missed {', '.join(others[:3])})" if others else ""))


# (op, signature, answered for its with-values signature, keyed by values already) of each
# miss of the job's replay
_misses: list = []
_recording = False


def _record_misses() -> list:
    """The misses of the next replay, recorded for a failure's reason."""
    global _recording
    import _eagerc as _C
    from eagerc.per_op import registration

    def recording(request):
        answer = registration._resolve(request)
        _misses.append((request.op_name, bytes(request.key), answer.specialized,
                        request.specialize_values))
        return answer

    if not _recording:
        _C._set_resolver(recording)
        _recording = True
    _misses.clear()
    return _misses


def _stored(key, stat_key: str, known_variants) -> bool:
    """Whether the store holds a kernel of `key` other than those the caller holds (their
    guards refused its call), or a refusal recorded for the key."""
    from eagerc.cache import service

    try:
        return service().get(key, stat_key, frozenset(known_variants)) is not None
    except NotCompiled:
        return True  # a refusal recorded for the signature: the caller's answer too
