"""Public entry points: `capture` and `capture_stats`."""
import collections
import threading

from .records import RecordCache, build_record

_state = threading.local()  # .active: a monitor run or a mock is in progress on this thread


def _eager_backend(gm, example_inputs):
    return gm


_BACKENDS = {"eager": _eager_backend}
LIFT_AFTER = 3  # records of one function before its float arguments become graph inputs


class Captured:
    """A function (or nn.Module) whose calls are captured; made by `capture`."""

    def __init__(self, fn, backend, lift_after):
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
                      "eager_runs": 0, "stop_reasons": collections.Counter()}
        self.__wrapped__ = fn

    def _compile(self, gm, example_inputs):
        backend = self._backend
        if backend is None or backend == "inductor":
            from .backend import _compile_graph
            fn, from_disk = _compile_graph(gm, example_inputs)
            self.stats["graphs_from_disk"] += from_disk
            return fn
        return self._backend_fn()(gm, example_inputs)

    def _backend_fn(self):
        backend = self._backend
        if isinstance(backend, str):
            try:
                backend = _BACKENDS[backend]
            except KeyError:
                raise ValueError(f"unknown capture backend {backend!r}: use 'inductor', "
                                 f"'eager' or a callable (gm, example_inputs) -> fn") from None
        return backend

    def _compile_symbolic(self, gm, example_inputs, dynamic_dims):
        from .backend import _compile_graph_symbolic
        backend = self._backend
        if backend is not None and backend != "inductor":
            backend = self._backend_fn()
        else:
            backend = None
        compiled, from_disk = _compile_graph_symbolic(gm, example_inputs, dynamic_dims, backend)
        self.stats["graphs_from_disk"] += from_disk
        return compiled

    def __call__(self, *args, **kwargs):
        if getattr(_state, "active", False):
            return self.fn(*args, **kwargs)  # nested: part of the outer capture
        _state.active = True
        try:
            record, slots = self.cache.match(args, kwargs)
            if record is not None:
                self.stats["hits"] += 1
                if record.eager:
                    self.stats["eager_runs"] += 1
                    return self.fn(*args, **kwargs)
                return record.mock(slots)
            self.stats["misses"] += 1
            return self._monitor_run(args, kwargs)
        finally:
            _state.active = False

    def _monitor_run(self, args, kwargs):
        from .monitor import LIFT_STOP, Monitor  # imports torch.fx: only when capture runs
        from .symbolic import scrub
        lift = self.lift_after is not None and len(self.cache) >= self.lift_after
        # Decided before the run: a symbolic run answers size reads with SymbolicInts.
        symbolic = self.symbolic_after is not None and len(self.cache) >= self.symbolic_after
        mon = Monitor(self.fn, args, kwargs, lift=lift, symbolic=symbolic)
        try:
            result = mon.run()
        except BaseException:
            mon.recorder.live = False
            raise
        try:
            self._record(mon, result, symbolic, LIFT_STOP)
        finally:
            mon.recorder.live = False  # SymbolicInts left anywhere act as plain ints
        return scrub(mon.graph, result) if symbolic else result

    def _record(self, mon, result, symbolic, lift_stop):
        if mon.stopped == lift_stop:
            self.lift_after = None  # the floats feed Python code: keep them as constants
            self.stats["stop_reasons"][lift_stop] += 1
            return  # no record: the next call with these values records them
        try:
            record = build_record(mon, result, self._compile,
                                  self._compile_symbolic if symbolic else None)
            if getattr(mon, "symbolic_failed", False):
                self.symbolic_after = None
        except Exception:
            if not mon.lifted:
                raise
            self.lift_after = None  # an op wants a Python number: keep floats constant
            return
        self.cache.add(record)
        if record.eager:
            self.stats["eager_runs"] += 1
            self.stats["stop_reasons"][record.stop_reason] += 1
        elif record.graph_module is not None:
            self.stats["graphs"] += 1

    def __repr__(self):
        return f"eagerc.capture({self.fn!r})"


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
    out["records"] = len(captured.cache)
    return out
