"""A miss: the call runs under the monitor (monitor.py), and what the run saw becomes a
record of the function (record_builder.py): a captured one, or an eager one when capture
stopped, the program raised or the build failed. Whatever fails in capture, the program
gets eager's result or eager's exception. The run reads the captured function's settings
and returns what it decided (`MissOutcome`); `Captured` applies it."""
from dataclasses import dataclass

from .record_builder import build_record


@dataclass
class MissOutcome:
    """What one monitor run decided, for `Captured` to apply."""
    result: object = None  # the program's result (eager's)
    # The program's exception (an eager record of the run that raised it was made):
    # raised to the program once the rest is applied.
    raised: Exception | None = None
    record: object = None  # the record to add
    stop: str | None = None  # why the call ran without a captured record (a stop reason)
    stop_site: str | None = None  # where in the program ("file:line"), when known
    eager_run: bool = False  # the record added is an eager one
    graph: bool = False  # the record added has a compiled graph
    floats_constant: bool = False  # lifting float arguments failed: keep them constant
    symbolic_failed: bool = False  # a symbolic record failed: no more symbolic sizes


def run(fn, args, kwargs, *, lift, symbolic, speculate, compiler, faults):
    """Monitor one call of `fn` and build its record with `compiler` (the function's
    GraphCompiler); internal errors go to `faults`. `lift`: float arguments become graph
    inputs; `symbolic`: sizes become SymbolicInts (decided before the run); `speculate`:
    tensor values Python reads are checked after the graph (speculate.py)."""
    from .monitor import LIFT_STOP, Monitor  # imports torch.fx: only when capture runs
    from .symbolic import scrub
    try:
        mon = Monitor(fn, args, kwargs, lift=lift, symbolic=symbolic)
        mon.speculate = speculate and not lift and not symbolic
        mon.prepare()
    except Exception as e:  # noqa: BLE001 - before the program ran: run it eagerly
        faults.internal_error("monitor", e)
        return MissOutcome(result=fn(*args, **kwargs))
    try:
        result = mon.run()
    except BaseException as e:
        mon.recorder.live = False
        if not mon.started:  # our set-up failed: the program has not run yet
            if not isinstance(e, Exception):
                raise
            faults.internal_error("monitor", e)
            return MissOutcome(result=fn(*args, **kwargs))
        if not mon.finished:
            # The program's own exception: eager raises it too. An eager record of what
            # the run read keeps identical calls from monitoring again (see
            # Captured._eager_after_raise).
            if isinstance(e, Exception):
                reason = f"program raised: {type(e).__name__}"
                record = eager_record(mon, reason, compiler, raised=True)
                if record is not None:
                    return MissOutcome(raised=e, record=record, stop=reason,
                                       stop_site=mon.stop_site)
            raise
        # Our tear-down failed after the program returned: its result is eager's.
        faults.internal_error("monitor", e)
        return MissOutcome(result=mon.result)
    try:
        outcome = _record(mon, result, symbolic, LIFT_STOP, compiler)
    except Exception as e:  # noqa: BLE001 - the program ran for real: its result stands
        faults.internal_error("record", e)
        outcome = MissOutcome(
            record=eager_record(mon, f"internal error in record: {type(e).__name__}", compiler))
    finally:
        mon.recorder.live = False  # SymbolicInts left anywhere act as plain ints
    outcome.result = scrub(mon.graph, result) if symbolic else result
    return outcome


def eager_record(mon, reason, compiler, raised=False):
    """After a failed record build, or a run the program ended with an exception: an
    eager record (its guard only), so that calls like this one run eagerly without
    another monitor run; None if that fails too (the next such call monitors again)."""
    try:
        mon.stopped = reason
        record = build_record(mon, None, compiler)
    except Exception:  # noqa: BLE001 - the next such call monitors again
        return None
    record.raised = raised
    return record


def _record(mon, result, symbolic, lift_stop, compiler):
    if mon.recorder.higher_order:
        # AOTAutograd's backward cannot be differentiated again: this function's training
        # graphs (this record's included) run with eager autograd from now on.
        compiler.eager_autograd = True
    if mon.stopped == lift_stop:
        # no record: the floats feed Python code; the next call with these values
        # records them as constants
        return MissOutcome(floats_constant=True, stop=lift_stop, stop_site=mon.stop_site)
    try:
        record = build_record(mon, result, compiler, symbolic=symbolic)
    except Exception as e:
        if not mon.lifted or mon.draws:
            raise
        # an op wants a Python number: keep floats constant. No record: the next such
        # call records again, and says why here
        return MissOutcome(floats_constant=True, stop=(
            f"lifted float arguments refused by the compile ({type(e).__name__}): "
            "floats kept constant"))
    outcome = MissOutcome(record=record,
                          symbolic_failed=getattr(mon, "symbolic_failed", False))
    if record.eager:
        outcome.eager_run = True
        outcome.stop, outcome.stop_site = record.stop_reason, mon.stop_site
    elif record.graph_module is not None:
        outcome.graph = True
    return outcome
