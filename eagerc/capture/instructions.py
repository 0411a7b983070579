"""Per-instruction handlers of the opcode monitor (paper §5.1: execution state capture).

Each handler runs before its instruction with the inputs readable on the value stack
(`frames.peek`); a handler that needs the instruction's output leaves a `post` action that runs
at the frame's next instruction, when the output is on top of the stack. Handlers translate
instructions into RefGraph updates through the `Monitor` (reads, writes, calls).
"""
import dis
import os

import torch

from . import frames, operation_opcodes, replayed_updates, state_opcodes

_OWN_DIR = os.path.dirname(os.path.abspath(__file__))
# torch's __torch_function__ dispatch plumbing: it only routes calls to the op recorder.
_TORCH_DIR = os.path.dirname(torch.__file__)
_PLUMBING = tuple(os.path.join(_TORCH_DIR, *p) for p in [
    ("overrides.py",), ("utils", "_python_dispatch.py"), ("_jit_internal.py",)])
SKIP = object()


def analyze(code):
    """Per instruction index: (handler, argval, arg) for instructions that need one."""
    if code.co_filename.startswith(_OWN_DIR) or code.co_filename in _PLUMBING:
        return SKIP
    table = [None] * (len(code.co_code) // 2)
    pops = [0] * len(table)  # stack items each instruction consumes (replayed_updates.py's tags)
    for ins in dis.get_instructions(code):
        h = _HANDLERS.get(ins.opname)
        if h is not None:
            table[ins.offset // 2] = (h, ins.argval, ins.arg)
        pops[ins.offset // 2] = replayed_updates.pops(ins)
    n = frames.n_localsplus(code)
    tops = [None if d is None else n + d for d in frames.stack_depths(code)]
    return table, tops, pops


class FrameWatch:
    """Per-frame trace function: runs the handler of each instruction and its post action."""

    __slots__ = ("mon", "table", "tops", "pops", "post", "kwnames", "resume", "tags", "ltags")

    def __init__(self, mon, info):
        self.mon, self.post, self.kwnames = mon, None, ()
        self.table, self.tops, self.pops = info
        self.tags, self.ltags = {}, {}  # replayed_updates.py: stack slot / local index -> Tag
        self.resume = False  # this frame suspended watching for one call (an annotated
        # Python function or an import): watch again at its next event, whatever it is

    def trace(self, frame, event, arg):
        mon = self.mon
        if self.resume:
            self.resume = False
            mon.suspend -= 1
            mon.opaque -= 1
        if mon.stopped is not None:
            return None
        if event != "opcode":
            self.post = None
            if self.tags:
                replayed_updates.escape_all(self)
            return self.safe_trace
        mon.frame = frame  # where the program is (Monitor.site)
        idx = frame.f_lasti >> 1
        top = self.tops[idx]
        if self.tags and top is not None:
            replayed_updates.check(self, frame, top)
        post = self.post
        if post is not None:
            self.post = None
            if top is not None:
                post(frame, top)
        if mon.stopped is not None:
            return None
        entry = self.table[idx]
        if entry is not None and top is not None and not mon.suspend:
            entry[0](self, frame, entry[1], entry[2], top)
        if self.tags and top is not None and self.pops[idx] != 0:
            replayed_updates.escape_popped(self, self.pops[idx], top)  # what the handler left
        return self.safe_trace

    def safe_trace(self, frame, event, arg):
        # A fault of the monitor must never change the program: stop capturing instead.
        try:
            return self.trace(frame, event, arg)
        except Exception as e:  # noqa: BLE001 - any fault, reported as the stop reason
            self.mon.stop(f"monitor error: {type(e).__name__}: {e}")
            return None



# Instructions that read or write state, operations and calls, and the local-slot moves
# that carry replayed updates' tags.
_HANDLERS = {
    **state_opcodes.HANDLERS, **operation_opcodes.HANDLERS,
    "LOAD_FAST": replayed_updates.load_fast, "LOAD_FAST_CHECK": replayed_updates.load_fast,
    "STORE_FAST": replayed_updates.store_fast, "SWAP": replayed_updates.swap,
    "COPY": replayed_updates.copy,
}
