"""A hit whose graph computed other tensor values than its record read (speculate.py): the
call is served by another record whose guard and values pass, or it is a miss; after
MAX_VALUE_MISSES such misses the function stops speculating."""
from .speculate import MAX_VALUE_MISSES, ValueMiss


def other_values(cap, missed, args, kwargs):
    """The record `missed` of `cap` (a Captured) read other tensor values than this call's
    graph computed (nothing was updated yet). (True, result) from another record whose
    guard and values pass; else (False, None): the call is a miss, and after
    MAX_VALUE_MISSES of those the function stops speculating (its next monitor run stops
    at the read: an eager record, with partial capture)."""
    for record in list(cap.cache.records):
        if record is missed or record.eager:
            continue
        try:
            slots = record.guard(args, kwargs)
        except Exception as e:  # noqa: BLE001 - a guard fault: that record is skipped
            cap.faults.internal_error("guard", e)
            continue
        if slots is None:
            continue
        try:
            result = record.mock(slots)
        except ValueMiss:
            continue
        except Exception as e:  # noqa: BLE001 - see Captured.mock_failed
            cap.mock_failed(record, e)
            return True, cap.fn(*args, **kwargs)
        cap.cache.promote(record)
        return True, result
    cap.stats["value_misses"] += 1
    if cap.stats["value_misses"] >= MAX_VALUE_MISSES:
        cap.speculate = False
    return False, None
