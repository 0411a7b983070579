"""Public entry points: `capture` and `capture_stats`."""
import collections
import logging
import os
import threading

from . import segments
from .backend import GraphCompiler
from .records import RecordCache, build_record
from .speculate import MAX_VALUE_MISSES, ValueMiss
from .segment_graph import compile_stream
from .stream import StreamRecorder

# Segment replay costs Python work per torch call: on small tensors a stopped call runs
# slower replayed than eagerly (docs/capture.md). EAGERC_CAPTURE_SEGMENTS=0 turns it off.
SEGMENTS_ENV = "EAGERC_CAPTURE_SEGMENTS"

_state = threading.local()  # .active: a monitor run or a mock is in progress on this thread


LIFT_AFTER = 3  # records of one function before its float arguments become graph inputs
MAX_FAULTS = 3  # internal errors of capture before a function runs eagerly for good
log = logging.getLogger("eagerc")


class Captured:
    """A function (or nn.Module) whose calls are captured; made by `capture`."""

    def __init__(self, fn, backend, lift_after, split=True):
        self.fn = fn
        self._backend = backend
        # After this many records, float arguments are lifted to graph inputs (paper §6.2.1)
        # instead of making one record per value; None: never.
        self.lift_after = lift_after
        # After as many records, new records get symbolic sizes for the dims of argument
        # tensors, and sizes Python reads become graph values (§6.2.1); None: never (or a
        # symbolic compile failed).
        self.symbolic_after = lift_after
        self.cache = RecordCache()
        # graphs_from_disk: compiled graphs loaded from kernel_cache instead of compiled.
        self.stats = {"hits": 0, "misses": 0, "graphs": 0, "graphs_from_disk": 0,
                      "eager_runs": 0, "split_runs": 0,
                      # graphs compiled for training (forward + backward, training.py)
                      "training_graphs": 0,
                      # partial capture of a stopped call's own ops (stream.py, segments.py):
                      # segment graphs compiled, replays, ops answered from them, replays
                      # that left the recorded stream
                      "segment_graphs": 0, "segment_runs": 0, "segment_ops": 0,
                      "segment_divergences": 0,
                      # calls whose tensor values matched no record's (speculate.py)
                      "value_misses": 0,
                      "stop_reasons": collections.Counter(),
                      # per miss while records exist: the failing check of the most
                      # recently matched record's guard (Record.why_not)
                      "guard_failures": collections.Counter()}
        # the record's backend: static, symbolic and training graphs (backend.py)
        self.compiler = GraphCompiler(backend, self.stats)
        self.faults = 0  # internal errors of capture (guard, monitor, record, mock)
        self.disabled = False
        # Monitor runs go on past tensor values Python reads, checked after the graph
        # (speculate.py); off after MAX_VALUE_MISSES calls no record's values matched.
        self.speculate = True
        self.split = split  # partial capture of child modules when a record stops
        self._children = None  # [(child module, its Captured forward)], made on first need
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        mode = segments.current()
        if mode is not None and not mode.paused:
            # A captured call inside a stopped call's stream (a split-off child): its ops
            # are its own, and what it returns is new on every call.
            mode.paused += 1
            try:
                result = self._call(args, kwargs)
            finally:
                mode.paused -= 1
            mode.note_fresh(result)
            return result
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if getattr(_state, "active", False):
            return self.fn(*args, **kwargs)  # nested: part of the outer capture
        if self.disabled:
            self.stats["eager_runs"] += 1
            return self.fn(*args, **kwargs)
        _state.active = True
        try:
            try:
                record, slots = self.cache.match(args, kwargs)
            except Exception as e:  # noqa: BLE001 - a guard fault: this call runs eagerly
                self._internal_error("guard", e)
                return self.fn(*args, **kwargs)
            if record is not None:
                self.stats["hits"] += 1
                if record.eager:
                    self.stats["eager_runs"] += 1
                    if record.raised:
                        return self._eager_after_raise(record, args, kwargs)
                    return self._eager(args, kwargs, record)
                try:
                    return record.mock(slots)
                except ValueMiss:
                    served, result = self._other_values(record, args, kwargs)
                    if served:
                        return result
                    self.stats["hits"] -= 1  # a miss after all
                except Exception as e:  # noqa: BLE001 - see _mock_failed
                    self._mock_failed(record, e)
                    return self.fn(*args, **kwargs)
            self.stats["misses"] += 1
            if len(self.cache) and record is None:
                self._note_guard_failure(args, kwargs)
            return self._monitor_run(args, kwargs)
        finally:
            _state.active = False

    def _other_values(self, missed, args, kwargs):
        """The record `missed` read other tensor values than this call's graph computed
        (speculate.py; nothing was updated yet). (True, result) from another record whose
        guard and values pass; else (False, None): the call is a miss, and after
        MAX_VALUE_MISSES of those the function stops speculating (its next monitor run
        stops at the read: an eager record, with partial capture)."""
        for record in list(self.cache.records):
            if record is missed or record.eager:
                continue
            try:
                slots = record.guard(args, kwargs)
            except Exception as e:  # noqa: BLE001 - a guard fault: that record is skipped
                self._internal_error("guard", e)
                continue
            if slots is None:
                continue
            try:
                result = record.mock(slots)
            except ValueMiss:
                continue
            except Exception as e:  # noqa: BLE001 - see _mock_failed
                self._mock_failed(record, e)
                return True, self.fn(*args, **kwargs)
            self.cache.promote(record)
            return True, result
        self.stats["value_misses"] += 1
        if self.stats["value_misses"] >= MAX_VALUE_MISSES:
            self.speculate = False
        return False, None

    def _note_guard_failure(self, args, kwargs):
        """Why the most recently matched record missed (a miss costs a monitor run: this
        is cheap beside it). Never fails the call."""
        try:
            why = self.cache.records[0].why_not(args, kwargs)
        except Exception as e:  # noqa: BLE001 - a report only
            why = f"(not explained: {type(e).__name__})"
        self.stats["guard_failures"][why or "(passes now)"] += 1

    def _eager(self, args, kwargs, record=None):
        """A call whose record stopped: it runs eagerly, and the calls of its child modules
        inside it are captured on their own (partial capture: the stop costs the code
        around the children, not the whole call). A child whose own capture stops splits
        into its children the same way. The call's own tensor ops run as compiled segment
        graphs: the first such call records its op stream, later ones replay it
        (stream.py, segments.py)."""
        children = self._split_children()
        mode = self._stream_mode(record, args, kwargs)
        if not children and mode is None:
            return self.fn(*args, **kwargs)
        if children:
            self.stats["split_runs"] += 1
        installed = []
        returned = False
        _state.active = False  # the children's calls are captures of their own
        try:
            for module, captured in children:
                d = module.__dict__
                if "forward" not in d:  # the module's call (hooks included) reaches it
                    d["forward"] = captured
                    installed.append(module)
            if mode is None:
                return self.fn(*args, **kwargs)
            with segments.active(mode):
                result = self.fn(*args, **kwargs)
            returned = True
            return result
        finally:
            for module in installed:
                module.__dict__.pop("forward", None)
            _state.active = True
            if mode is not None:
                self._stream_done(record, mode, returned)

    def _stream_mode(self, record, args, kwargs):
        """The mode that records (first hit) or replays (later hits) the stopped call's op
        stream; None where there is none: no record (a run that raised), no split, grad
        mode (autograd is eager's), or a stream that could not be made."""
        import torch
        if record is None or not self.split or self.disabled or torch.is_grad_enabled():
            return None
        if os.environ.get(SEGMENTS_ENV, "1") in ("0", "false", "False"):
            return None  # stopped calls run eagerly (children still captured)
        stream = record.stream
        if stream is False:
            return None
        try:
            if stream is None:
                return StreamRecorder(args, kwargs)
            return segments.StreamReplay(stream, args, kwargs)
        except Exception as e:  # noqa: BLE001 - the call runs eagerly as before
            self._segment_fault(record, e)
            return None

    def _stream_done(self, record, mode, returned):
        """After a recording: compile the segments; after a replay: count it, and record
        the stream again after replays that keep leaving it. Never fails the call."""
        try:
            if isinstance(mode, StreamRecorder):
                if not returned:
                    return  # the program raised: the next such call records
                record.stream_recordings += 1
                stream = compile_stream(mode, self.compiler.compile)
                record.stream = stream if stream is not None and stream.graph_ops() else False
                if record.stream:
                    self.stats["segment_graphs"] += sum(
                        1 for s in stream.segments if s.fn is not None)
                return
            stream = mode.stream
            self.stats["segment_runs"] += 1
            self.stats["segment_ops"] += mode.answered
            if not mode.diverged and mode.i == len(stream.entries):
                stream.diverged_in_a_row = 0
                return
            if returned or mode.diverged:
                self.stats["segment_divergences"] += 1
                stream.diverged_in_a_row += 1
                if stream.diverged_in_a_row >= segments.REPLAYS_BEFORE_RERECORD:
                    # recorded on an unusual call: record again (a few times at most)
                    record.stream = None if record.stream_recordings < 3 else False
        except Exception as e:  # noqa: BLE001 - see above
            self._segment_fault(record, e)

    def _segment_fault(self, record, error):
        record.stream = False
        self.stats["stop_reasons"][f"internal error in segments: {type(error).__name__}"] += 1
        log.debug("eagerc.capture: segments failed for %r", self.fn, exc_info=error)

    def _split_children(self):
        if self._children is None:
            self._children = []
            if self.split and not self.disabled:
                module = _module_of(self.fn)
                for child in _called_children(module) if module is not None else ():
                    fn = type(child).forward.__get__(child)
                    captured = Captured(fn, self._backend, self.lift_after)
                    self._children.append((child, captured))
        return self._children

    def split_stats(self):
        """Counters summed over the captured child calls of split runs (recursively)."""
        total = collections.Counter()
        for _, child in self._children or ():
            total["children"] += 1
            for k in ("graphs", "hits", "misses", "eager_runs", "segment_graphs",
                      "segment_runs", "segment_ops", "segment_divergences"):
                total[k] += child.stats[k]
            total.update(child.split_stats())
        return total

    def _internal_error(self, stage, error):
        """A fault of capture itself: counted in stop_reasons; after MAX_FAULTS of them the
        function runs eagerly for good (the program never sees one)."""
        self.stats["stop_reasons"][f"internal error in {stage}: {type(error).__name__}"] += 1
        self.faults += 1
        log.debug("eagerc.capture: %s failed for %r", stage, self.fn, exc_info=error)
        if self.faults >= MAX_FAULTS:
            self.disabled = True

    def _mock_failed(self, record, error):
        """The mock raised. Its compiled graph runs first and writes nothing back before it
        finishes (functionalized graphs copy into their inputs at the end), and the record's
        other work comes after it: the call then runs eagerly from the arguments. The record
        is dropped, so it cannot fail again."""
        self.cache.remove(record)
        self._internal_error("mock", error)

    def _monitor_run(self, args, kwargs):
        from .monitor import LIFT_STOP, Monitor  # imports torch.fx: only when capture runs
        from .symbolic import scrub
        lift = self.lift_after is not None and len(self.cache) >= self.lift_after
        # Decided before the run: a symbolic run answers size reads with SymbolicInts.
        symbolic = self.symbolic_after is not None and len(self.cache) >= self.symbolic_after
        try:
            mon = Monitor(self.fn, args, kwargs, lift=lift, symbolic=symbolic)
            mon.speculate = self.speculate and not lift and not symbolic
            mon.prepare()
        except Exception as e:  # noqa: BLE001 - before the program ran: run it eagerly
            self._internal_error("monitor", e)
            return self.fn(*args, **kwargs)
        try:
            result = mon.run()
        except BaseException as e:
            mon.recorder.live = False
            if not mon.started:  # our set-up failed: the program has not run yet
                if not isinstance(e, Exception):
                    raise
                self._internal_error("monitor", e)
                return self.fn(*args, **kwargs)
            if not mon.finished:
                # The program's own exception: eager raises it too. An eager record of what
                # the run read keeps identical calls from monitoring again (see
                # _eager_after_raise).
                if isinstance(e, Exception):
                    reason = f"program raised: {type(e).__name__}"
                    if self._eager_record(mon, reason, raised=True):
                        self.stats["stop_reasons"][reason] += 1
                raise
            # Our tear-down failed after the program returned: its result is eager's.
            self._internal_error("monitor", e)
            return mon.result
        try:
            self._record(mon, result, symbolic, LIFT_STOP)
        except Exception as e:  # noqa: BLE001 - the program ran for real: its result stands
            self._internal_error("record", e)
            self._eager_record(mon, f"internal error in record: {type(e).__name__}")
        finally:
            mon.recorder.live = False  # SymbolicInts left anywhere act as plain ints
        return scrub(mon.graph, result) if symbolic else result

    def _eager_record(self, mon, reason, raised=False):
        """After a failed record build, or a run the program ended with an exception: an
        eager record (its guard only), so that calls like this one run eagerly without
        another monitor run; none if that fails too. Whether one was added."""
        try:
            mon.stopped = reason
            record = build_record(mon, None, self.compiler.compile)
        except Exception:  # noqa: BLE001 - the next such call monitors again
            return False
        record.raised = raised
        self.cache.add(record)
        return True

    def _eager_after_raise(self, record, args, kwargs):
        """A hit of the eager record of a run that raised. The guard covers what that run
        read up to the exception, not what made it raise (often tensor values: an index
        out of range), so the call runs eagerly: raising again keeps the record; returning
        drops it, and the next such call is monitored and recorded."""
        result = self._eager(args, kwargs)
        self.cache.remove(record)
        return result

    def _record(self, mon, result, symbolic, lift_stop):
        if mon.stopped == lift_stop:
            self.lift_after = None  # the floats feed Python code: keep them as constants
            self.stats["stop_reasons"][lift_stop] += 1
            return  # no record: the next call with these values records them
        try:
            record = build_record(mon, result, self.compiler.compile,
                                  self.compiler.compile_symbolic if symbolic else None)
            if getattr(mon, "symbolic_failed", False):
                self.symbolic_after = None
        except Exception as e:
            if not mon.lifted:
                raise
            # an op wants a Python number: keep floats constant. No record: the next such
            # call records again, and says why here
            self.lift_after = None
            self.stats["stop_reasons"][
                f"lifted float arguments refused by the compile ({type(e).__name__}): "
                "floats kept constant"] += 1
            return
        self.cache.add(record)
        if record.eager:
            self.stats["eager_runs"] += 1
            self.stats["stop_reasons"][record.stop_reason] += 1
        elif record.graph_module is not None:
            self.stats["graphs"] += 1

    def __repr__(self):
        return f"eagerc.capture({self.fn!r})"


def _module_of(fn):
    import torch
    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _called_children(module):
    """Child modules a forward calls: direct children; containers without a forward of
    their own (ModuleList, ModuleDict) stand for their children."""
    import torch
    seen, out = {id(module)}, []
    stack = list(module.children())[::-1]
    while stack:
        child = stack.pop()
        if id(child) in seen:
            continue
        seen.add(id(child))
        if type(child).forward is torch.nn.Module.forward:  # no forward: a container
            stack.extend(list(child.children())[::-1])
        else:
            out.append(child)
    return out


def capture(fn=None, *, dynamic=None, backend=None):
    """See eagerc.capture.capture (the public entry point, which imports this module lazily)."""
    if fn is None:
        return lambda f: capture(f, dynamic=dynamic, backend=backend)
    lift_after = {None: LIFT_AFTER, True: 0, False: None}[dynamic]
    return Captured(fn, backend, lift_after)


def capture_stats(captured):
    """See eagerc.capture.capture_stats."""
    if not isinstance(captured, Captured):
        raise TypeError(f"capture_stats expects what eagerc.capture returned, got "
                        f"{type(captured).__name__}")
    out = dict(captured.stats)
    out["stop_reasons"] = dict(out["stop_reasons"])
    out["guard_failures"] = dict(out["guard_failures"])
    out["records"] = len(captured.cache)
    if out["split_runs"]:
        out["split"] = dict(captured.split_stats())
    return out
