"""`Captured`: a captured function's calls dispatched to its records.

A call's guard picks a record: a hit runs its mock (value_misses.py when the graph computed
other values than the record read), a hit of an eager record runs the call eagerly with
partial capture (partial_capture.py), a miss runs the monitor and adds a record
(monitor_run.py). Internal errors of capture never reach the program (faults.py).
Those jobs read the function's state and return what they decided; only `Captured`
changes its state.
"""
import collections
import threading

from . import frames, monitor_run, partial_capture, value_misses
from .counters import CaptureStats
from .faults import Faults
from .graph_compiler import GraphCompiler
from .record_cache import RecordCache
from .speculate import MAX_VALUE_MISSES, ValueMiss

# Misses caused by one changed value (a counter the program branches on) that record again;
# later ones run eagerly.
MAX_RERECORDS = 4

UNSUPPORTED_PYTHON = "this Python's frame layout is not supported by the monitor"

_state = threading.local()  # .active: a monitor run or a mock is in progress on this thread


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
        self.stats = CaptureStats()  # what capture_stats reports
        # the record's backend: static, symbolic and training graphs (graph_compiler.py)
        self.compiler = GraphCompiler(backend, self.stats)
        self.faults = Faults(fn, self.stats)  # internal errors of capture
        # Monitor runs go on past tensor values Python reads, checked after the graph
        # (speculate.py); off after MAX_VALUE_MISSES calls no record's values matched.
        self.speculate = True
        self.split = split  # partial capture of child modules when a record stops
        self._children = None  # [(child module, its Captured forward)], made on first need
        # (path, "file:line") of a value read by the program -> misses it caused (see
        # _changes_every_call)
        self._rerecords = {}
        self.__wrapped__ = fn

    @property
    def disabled(self):
        """After MAX_FAULTS internal errors the function runs eagerly for good."""
        return self.faults.disabled

    def __call__(self, *args, **kwargs):
        mode = partial_capture.current_stream_mode()
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
            self.stats.eager_runs += 1
            return self.fn(*args, **kwargs)
        if not frames.stack_supported():
            # The monitor reads frames' value stacks by their layout (frames.py); on a
            # Python whose layout it does not know, reading them could crash the process.
            self.stats.stop(UNSUPPORTED_PYTHON)
            self.stats.eager_runs += 1
            return self.fn(*args, **kwargs)
        _state.active = True
        try:
            try:
                record, slots = self.cache.match(args, kwargs)
            except Exception as e:  # noqa: BLE001 - a guard fault: this call runs eagerly
                self.faults.internal_error("guard", e)
                return self.fn(*args, **kwargs)
            if record is not None:
                self.stats.hits += 1
                if record.eager:
                    self.stats.eager_runs += 1
                    if record.raised:
                        return self._eager_after_raise(record, args, kwargs)
                    return self.run_eagerly(args, kwargs, record)
                try:
                    return record.mock(slots)
                except ValueMiss:
                    other = value_misses.other_record(self.cache.records, record, args, kwargs,
                                                      self.faults)
                    if other.error is not None:
                        self.mock_failed(other.record, other.error)
                        return self.fn(*args, **kwargs)
                    if other.record is not None:
                        self.cache.promote(other.record)
                        return other.result
                    self._value_missed()
                    self.stats.hits -= 1  # a miss after all
                except Exception as e:  # noqa: BLE001 - see mock_failed
                    self.mock_failed(record, e)
                    return self.fn(*args, **kwargs)
            self.stats.misses += 1
            if len(self.cache) and record is None:
                why, changed = self._guard_failure(args, kwargs)
                if changed is not None and self._changes_every_call(changed):
                    self.stats.eager_runs += 1
                    return self.run_eagerly(args, kwargs)
                self.stats.guard_failed(why)
            return self._miss(args, kwargs)
        finally:
            _state.active = False

    def _miss(self, args, kwargs):
        """Monitor the call and apply what the run decided (monitor_run.py)."""
        n = len(self.cache)
        lift = self.lift_after is not None and n >= self.lift_after
        outcome = monitor_run.run(
            self.fn, args, kwargs, lift=lift,
            # decided before the run: a symbolic run answers size reads with SymbolicInts
            symbolic=self.symbolic_after is not None and n >= self.symbolic_after,
            speculate=self.speculate, compiler=self.compiler, faults=self.faults)
        if outcome.floats_constant:
            self.lift_after = None  # the floats feed Python code: keep them as constants
        if outcome.symbolic_failed:
            self.symbolic_after = None
        if outcome.record is not None:
            self.cache.add(outcome.record)
        if outcome.stop is not None:
            self.stats.stop(outcome.stop, outcome.stop_site)
        self.stats.eager_runs += outcome.eager_run
        self.stats.graphs += outcome.graph
        if outcome.raised is None:
            return outcome.result
        error, outcome = outcome.raised, None
        try:
            raise error  # the program's own exception, as eager raises it
        finally:
            error = None  # its traceback holds this frame: no cycle through the locals

    def _value_missed(self):
        """No record's tensor values matched the call's: after MAX_VALUE_MISSES of those,
        monitor runs stop at such reads (an eager record, with partial capture)."""
        self.stats.value_misses += 1
        if self.stats.value_misses >= MAX_VALUE_MISSES:
            self.speculate = False

    def run_eagerly(self, args, kwargs, record=None):
        """The call runs eagerly, with partial capture (partial_capture.py)."""
        return partial_capture.run(self, _state, args, kwargs, record)

    def _guard_failure(self, args, kwargs):
        """Why the most recently matched record missed (a miss costs a monitor run: this
        is cheap beside it), and the changed value it names (Record.changed_value) or
        None. Never fails the call."""
        try:
            why = self.cache.records[0].why_not(args, kwargs)
            changed = self.cache.records[0].changed_value()
        except Exception as e:  # noqa: BLE001 - a report only
            why, changed = f"(not explained: {type(e).__name__})", None
        return why or "(passes now)", changed

    def _changes_every_call(self, changed):
        """A miss because a value the program read changed (`changed`: its access path and
        where it was read): whether that value has made MAX_RERECORDS records already. A
        counter deciding a branch on every call would record on every call; after the
        bound its misses run eagerly (with partial capture), counted once as a stop that
        names the value and the line."""
        n = self._rerecords[changed] = self._rerecords.get(changed, 0) + 1
        if n <= MAX_RERECORDS:
            return False
        if n == MAX_RERECORDS + 1:
            path, site = changed
            reason = (f"re-recorded {MAX_RERECORDS} times: {path} changes every call "
                      f"(read at {site})")
            self.stats.stop(reason, site)
        return True

    def mock_failed(self, record, error):
        """The mock raised. Its compiled graph runs first and writes nothing back before it
        finishes (functionalized graphs copy into their inputs at the end), and the record's
        other work comes after it: the call then runs eagerly from the arguments. The record
        is dropped, so it cannot fail again."""
        self.cache.remove(record)
        self.faults.internal_error("mock", error)

    def _eager_after_raise(self, record, args, kwargs):
        """A hit of the eager record of a run that raised. The guard covers what that run
        read up to the exception, not what made it raise (often tensor values: an index
        out of range), so the call runs eagerly: raising again keeps the record; returning
        drops it, and the next such call is monitored and recorded."""
        result = self.run_eagerly(args, kwargs)
        self.cache.remove(record)
        return result

    def split_children(self):
        """[(child module, its own Captured forward)] of the module this function is (or
        whose method it is), made on first need; [] for a function, or with splitting off."""
        if self._children is None:
            self._children = []
            if self.split and not self.disabled:
                self._children = [(child, self._split_child(child))
                                  for child in partial_capture.child_modules(self.fn)]
        return self._children

    def _split_child(self, module):
        child = type(self)(type(module).forward.__get__(module), self._backend, self.lift_after)
        child.compiler.eager_autograd = self.compiler.eager_autograd
        return child

    def split_stats(self):
        """Counters summed over the captured child calls of split runs (recursively)."""
        total = collections.Counter()
        for _, child in self._children or ():
            total["children"] += 1
            total.update(child.stats.split_counters())
            total.update(child.split_stats())
        return total

    def __repr__(self):
        return f"eagerc.capture({self.fn!r})"
