"""A miss: the call runs under the monitor (monitor.py), and what the run saw becomes a
record of the function (record_builder.py): a captured one, or an eager one when capture
stopped, the program raised or the build failed. Whatever fails in capture, the program
gets eager's result or eager's exception."""
from .record_builder import build_record


def run(cap, args, kwargs):
    """Monitor one call of `cap` (a Captured) and add its record."""
    from .monitor import LIFT_STOP, Monitor  # imports torch.fx: only when capture runs
    from .symbolic import scrub
    lift = cap.lift_after is not None and len(cap.cache) >= cap.lift_after
    # Decided before the run: a symbolic run answers size reads with SymbolicInts.
    symbolic = cap.symbolic_after is not None and len(cap.cache) >= cap.symbolic_after
    try:
        mon = Monitor(cap.fn, args, kwargs, lift=lift, symbolic=symbolic)
        mon.speculate = cap.speculate and not lift and not symbolic
        mon.prepare()
    except Exception as e:  # noqa: BLE001 - before the program ran: run it eagerly
        cap.faults.internal_error("monitor", e)
        return cap.fn(*args, **kwargs)
    try:
        result = mon.run()
    except BaseException as e:
        mon.recorder.live = False
        if not mon.started:  # our set-up failed: the program has not run yet
            if not isinstance(e, Exception):
                raise
            cap.faults.internal_error("monitor", e)
            return cap.fn(*args, **kwargs)
        if not mon.finished:
            # The program's own exception: eager raises it too. An eager record of what
            # the run read keeps identical calls from monitoring again (see
            # Captured._eager_after_raise).
            if isinstance(e, Exception):
                reason = f"program raised: {type(e).__name__}"
                if add_eager_record(cap, mon, reason, raised=True):
                    cap.stats["stop_reasons"][reason] += 1
                    _count_site(cap, reason, mon.stop_site)
            raise
        # Our tear-down failed after the program returned: its result is eager's.
        cap.faults.internal_error("monitor", e)
        return mon.result
    try:
        _record(cap, mon, result, symbolic, LIFT_STOP)
    except Exception as e:  # noqa: BLE001 - the program ran for real: its result stands
        cap.faults.internal_error("record", e)
        add_eager_record(cap, mon, f"internal error in record: {type(e).__name__}")
    finally:
        mon.recorder.live = False  # SymbolicInts left anywhere act as plain ints
    return scrub(mon.graph, result) if symbolic else result


def add_eager_record(cap, mon, reason, raised=False):
    """After a failed record build, or a run the program ended with an exception: an
    eager record (its guard only), so that calls like this one run eagerly without
    another monitor run; none if that fails too. Whether one was added."""
    try:
        mon.stopped = reason
        record = build_record(mon, None, cap.compiler)
    except Exception:  # noqa: BLE001 - the next such call monitors again
        return False
    record.raised = raised
    cap.cache.add(record)
    return True


def _record(cap, mon, result, symbolic, lift_stop):
    if mon.recorder.higher_order:
        cap.compiler.eager_autograd = True
    if mon.stopped == lift_stop:
        cap.lift_after = None  # the floats feed Python code: keep them as constants
        cap.stats["stop_reasons"][lift_stop] += 1
        _count_site(cap, lift_stop, mon.stop_site)
        return  # no record: the next call with these values records them
    try:
        record = build_record(mon, result, cap.compiler, symbolic=symbolic)
        if getattr(mon, "symbolic_failed", False):
            cap.symbolic_after = None
    except Exception as e:
        if not mon.lifted or mon.draws:
            raise
        # an op wants a Python number: keep floats constant. No record: the next such
        # call records again, and says why here
        cap.lift_after = None
        cap.stats["stop_reasons"][
            f"lifted float arguments refused by the compile ({type(e).__name__}): "
            "floats kept constant"] += 1
        return
    cap.cache.add(record)
    if record.eager:
        cap.stats["eager_runs"] += 1
        cap.stats["stop_reasons"][record.stop_reason] += 1
        _count_site(cap, record.stop_reason, mon.stop_site)
    elif record.graph_module is not None:
        cap.stats["graphs"] += 1


def _count_site(cap, reason, site):
    """`capture_stats`' stop_sites: where in the program (file:line) each reason stopped."""
    if site is not None:
        sites = cap.stats["stop_sites"].setdefault(reason, {})
        sites[site] = sites.get(site, 0) + 1
