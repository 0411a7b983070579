"""A hit whose graph computed other tensor values than its record read (speculate.py): the
call is served by another record whose guard and values pass, or it is a miss (`Captured`
counts it: after MAX_VALUE_MISSES such misses the function stops speculating)."""
from dataclasses import dataclass

from .speculate import ValueMiss


@dataclass
class OtherRecord:
    """What `other_record` found, for `Captured` to apply: `record` served the call with
    `result`, or its mock raised `error` (the call then runs eagerly and the record is
    dropped, Captured.mock_failed); `record` None: none serves it, a value miss."""
    record: object = None
    result: object = None
    error: Exception | None = None


def other_record(records, missed, args, kwargs, faults):
    """The record `missed` (one of `records`) read other tensor values than this call's
    graph computed (nothing was updated yet): the first other captured record whose guard
    and values pass. A guard that fails inside is skipped (counted in `faults`)."""
    for record in list(records):
        if record is missed or record.eager:
            continue
        try:
            slots = record.guard(args, kwargs)
        except Exception as e:  # noqa: BLE001 - a guard fault: that record is skipped
            faults.internal_error("guard", e)
            continue
        if slots is None:
            continue
        try:
            result = record.mock(slots)
        except ValueMiss:
            continue
        except Exception as e:  # noqa: BLE001 - see Captured.mock_failed
            return OtherRecord(record, error=e)
        return OtherRecord(record, result)
    return OtherRecord()
