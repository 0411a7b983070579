"""How the monitor hears about every instruction: `sys.monitoring` (PEP 669, Python 3.12+)
where available, else `sys.settrace` with `frame.f_trace_opcodes` (Python 3.11).

Both give the monitor the same two things (monitor.Monitor._call_event and the FrameWatch it
returns): a *call* event when a Python frame starts or resumes, which decides whether the
frame is watched and returns its watch; and an *opcode* event before each instruction of a
watched frame, plus a non-opcode event when the frame's stack is left by an exception or a
return (the watch then drops its pending post-instruction action).

`EAGERC_CAPTURE_TRACER=settrace` forces the settrace path on 3.12 (for comparison).
"""
import sys
import threading

from eagerc import _config


def make_tracer(call_event, on_error):
    """`on_error(reason)` hears of a fault in our own callbacks (capture then stops; the
    program must never see it)."""
    if hasattr(sys, "monitoring") and not _config.capture_forces_settrace():
        tool = _free_tool_id()
        if tool is not None:
            return MonitoringTracer(call_event, on_error, tool)
    return SetTraceTracer(call_event)


class SetTraceTracer:
    """sys.settrace for this thread; the tracer found there is put back afterwards."""

    def __init__(self, call_event):
        self.call_event = call_event
        self.previous = None

    def __enter__(self):
        self.previous = sys.gettrace()
        # 3.12 turns on per-instruction events only for threads whose settrace comes
        # after some frame asked for them.
        sys._getframe().f_trace_opcodes = True
        sys.settrace(self.call_event)
        return self

    def __exit__(self, *exc):
        sys.settrace(self.previous)


def _free_tool_id():
    for tool in range(6):  # ids 0-5 are for tools; 2 (coverage), 5 (optimizers) are taken last
        if tool in (2, 5):
            continue
        if sys.monitoring.get_tool(tool) is None:
            return tool
    return None


class MonitoringTracer:
    """sys.monitoring: starts, unwinds and exceptions everywhere; INSTRUCTION, returns and
    yields only in code objects of watched frames; events of other threads are ignored
    (monitoring is process-wide)."""

    def __init__(self, call_event, on_error, tool):
        self.call_event, self.on_error = call_event, on_error
        self.tool = tool
        self.watches = {}  # frame -> its watch's trace function
        self.codes = set()  # code objects with local INSTRUCTION events turned on
        self.thread = threading.get_ident()

    def __enter__(self):
        self.fallback = None
        try:
            self._install()
        except Exception:  # noqa: BLE001 - an API we do not know: settrace still works
            self._uninstall()
            self.fallback = SetTraceTracer(self.call_event).__enter__()
        return self

    def _install(self):
        m = sys.monitoring
        E = m.events
        m.use_tool_id(self.tool, "eagerc.capture")
        m.register_callback(self.tool, E.PY_START, self._start)
        m.register_callback(self.tool, E.PY_RESUME, self._start)
        m.register_callback(self.tool, E.INSTRUCTION, self._instruction)
        for ev in (E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND):
            m.register_callback(self.tool, ev, self._leave_frame)
        for ev in (E.RAISE, E.RERAISE, E.EXCEPTION_HANDLED):
            m.register_callback(self.tool, ev, self._exception)
        # Exception and unwind events exist only process-wide; the rest is set per code object.
        m.set_events(self.tool, E.PY_START | E.PY_RESUME | E.PY_UNWIND | E.RAISE | E.RERAISE
                     | E.EXCEPTION_HANDLED)

    def __exit__(self, *exc):
        if self.fallback is not None:
            self.fallback.__exit__(*exc)
        else:
            self._uninstall()

    def _uninstall(self):
        m = sys.monitoring
        if m.get_tool(self.tool) != "eagerc.capture":
            return
        m.set_events(self.tool, 0)
        for code in self.codes:
            m.set_local_events(self.tool, code, 0)
        for ev in (m.events.PY_START, m.events.PY_RESUME, m.events.INSTRUCTION,
                   m.events.PY_RETURN, m.events.PY_YIELD, m.events.PY_UNWIND, m.events.RAISE,
                   m.events.RERAISE, m.events.EXCEPTION_HANDLED):
            m.register_callback(self.tool, ev, None)
        m.free_tool_id(self.tool)
        self.watches.clear()

    # Callbacks run in the frame above them: sys._getframe(1) is the frame of the event.
    # A fault in one must not reach the program: it stops capture instead.
    def _start(self, code, offset):
        if threading.get_ident() != self.thread:
            return
        try:
            frame = sys._getframe(1)
            trace = self.call_event(frame, "call", None)
            if trace is None:
                self.watches.pop(frame, None)
                return
            self.watches[frame] = trace
            if code not in self.codes:
                self.codes.add(code)
                E = sys.monitoring.events
                sys.monitoring.set_local_events(
                    self.tool, code, E.INSTRUCTION | E.PY_RETURN | E.PY_YIELD)
        except Exception as e:  # noqa: BLE001
            self.on_error(f"monitor error: {type(e).__name__}: {e}")

    def _instruction(self, code, offset):
        self._deliver("opcode")

    def _leave_frame(self, code, offset, *rest):
        # Returned, yielded (a resume is a new start) or unwound: forget the frame, so its
        # locals are not kept alive by us.
        if threading.get_ident() == self.thread:
            self.watches.pop(sys._getframe(1), None)

    def _exception(self, code, offset, *rest):
        # The value stack is cut back to a handler's depth: the watch drops its pending action.
        self._deliver("exception")

    def _deliver(self, event):
        """Hand `event` to the watch of the frame it happened in (two frames up: the
        callback's caller)."""
        if threading.get_ident() != self.thread:
            return
        frame = sys._getframe(2)
        trace = self.watches.get(frame)
        if trace is not None and trace(frame, event, None) is None:
            del self.watches[frame]
