"""Replaying a recorded op stream (stream.py): the stopped call's own tensor ops run as
compiled segment graphs while its Python code runs eagerly.

`StreamReplay` is a TorchFunctionMode over one eager run of the call. Each torch call is
checked against the next recorded entry: the same function, equal constants, and each tensor
argument the very object the entry's node is bound to in this run. Then
- a GRAPH entry is answered from its segment's compiled graph, run when the segment's first
  GRAPH entry is called (every input exists by then: stream.py cuts segments so);
- a VIEW or RUN entry is the program's call, made for real; its results are bound to nodes.
Why this is never wrong: a segment's graph is pure, and its inputs are exactly the objects
the program passes; between the graph's run and the last op it answers, the program makes
only matched pure calls and metadata reads (any write into a tensor is a torch call, so it is
either the next recorded entry, which is RUN and ends the segment, or a divergence). Reads
that hand out a tensor's memory (numpy, data_ptr) end graph answers for the rest of the
stream. The first call that does not match (another function, another constant, another
object), or any fault of the replay itself, ends the replay for that call: from there every
call is the program's own, and tensors already answered are right for the values they were
computed from.
"""
import threading
import weakref

import torch

from .torch_calls import func_name
from .stream import (GRAPH, RUN, flatten_args, flatten_out, passes_through, raw_meta,
                     raw_storage, resolve_path, unflatten_out)

_local = threading.local()  # .modes: stream modes (recording or replaying) of this thread
REPLAYS_BEFORE_RERECORD = 2  # replays in a row that diverged before the stream is recorded again


def current():
    """The innermost stream mode (StreamRecorder or StreamReplay) of this thread, or None."""
    modes = getattr(_local, "modes", None)
    return modes[-1] if modes else None


class active:
    """`with active(mode):` pushes a stream mode (and the TorchFunctionMode itself)."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        if not hasattr(_local, "modes"):
            _local.modes = []
        self.mode.__enter__()
        _local.modes.append(self.mode)
        return self.mode

    def __exit__(self, *exc):
        _local.modes.pop()
        return self.mode.__exit__(*exc)


class _Missing(Exception):
    """A segment input not bound in this run (a replay fault, ends the replay)."""


class StreamReplay(torch.overrides.TorchFunctionMode):
    """Replays `stream` over one eager run of the call with arguments (args, kwargs)."""

    def __init__(self, stream, args, kwargs):
        super().__init__()
        self.stream = stream
        self.paused = 0  # > 0 while a captured child call runs
        self.i = 0  # next entry
        self.diverged = False
        self.answered = 0  # GRAPH entries answered from compiled graphs
        self._env = {}  # node id -> weakref of the tensor bound to it in this run
        self._pending = {}  # node id -> graph output not yet handed to the program
        self._seg_state = {}  # segment index -> True (graph ran) or False (runs for real)
        self._leaves = ()
        for nid, node in enumerate(stream.nodes):
            if node.kind == "arg":
                try:
                    t = resolve_path(node.path, args, kwargs)
                except Exception:  # noqa: BLE001 - unbound: an entry using it diverges
                    continue
                if isinstance(t, torch.Tensor):
                    self._env[nid] = weakref.ref(t)
            elif node.kind == "ext":
                if node.ref() is not None:
                    self._env[nid] = node.ref

    def note_fresh(self, result):
        """Results of captured child calls are bound at their first use."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused or self.diverged:
            return func(*args, **kwargs)
        try:
            passes = _passes(func)
            e = None if passes else self._match(func, args, kwargs)
        except Exception:  # noqa: BLE001 - a fault of the replay: the call is the program's
            passes, e = False, None
        if passes:
            return func(*args, **kwargs)
        if e is None:
            self.diverged = True
            self._pending.clear()
            return func(*args, **kwargs)
        self.i += 1
        if e.kind == GRAPH and self._seg_state.get(e.seg) is not False:
            try:
                return self._answer(e)
            except Exception:  # noqa: BLE001 - this segment's ops run for real this call
                self._seg_state[e.seg] = False
        out = func(*args, **kwargs)
        try:
            self._bind_real(e, out)
        except Exception:  # noqa: BLE001 - see above
            self.diverged = True
            self._pending.clear()
        return out

    # -- matching ------------------------------------------------------------------------
    def _match(self, func, args, kwargs):
        entries = self.stream.entries
        if self.i >= len(entries):
            return None
        e = entries[self.i]
        if e.func is not func:
            return None
        if e.kind == RUN:  # the program's own call: its arguments may be anything
            if e.binds:  # but a new tensor first used here is bound for later entries
                leaves = flatten_args(args, kwargs)[0]
                for i in e.binds:
                    if i < len(leaves) and isinstance(leaves[i], torch.Tensor):
                        self._env.setdefault(e.refs[i], weakref.ref(leaves[i]))
            return e
        leaves, spec = flatten_args(args, kwargs)
        if spec != e.spec:
            return None
        # The program may turn grad mode on inside the call: an answer from a graph would
        # have no autograd history.
        grad = torch.is_grad_enabled()
        fresh = []
        for i, (leaf, r, c) in enumerate(zip(leaves, e.refs, e.consts)):
            if r is None:
                if i in e.lifted:  # a graph input: any float
                    if type(leaf) is not float:
                        return None
                elif not _same(leaf, c):
                    return None
                continue
            if not isinstance(leaf, torch.Tensor) or grad and _requires_grad(leaf):
                return None
            ref = self._env.get(r)
            if ref is None:
                node = self.stream.nodes[r]
                if node.kind != "fresh" or node.avail != self.i:
                    return None
                fresh.append((r, leaf))
            elif ref() is not leaf:
                return None
        for r, leaf in fresh:
            self._env[r] = weakref.ref(leaf)
        self._leaves = leaves  # the lifted floats of a segment's first GRAPH entry
        return e

    # -- answers ---------------------------------------------------------------------------
    def _answer(self, e):
        if e.seg not in self._seg_state:
            self._run_segment(e.seg)
        out = [None if o is None else self._pending.pop(o) for o in e.outs]
        for o, t in zip(e.outs, out):
            if o is not None:
                self._env[o] = weakref.ref(t)
        self.answered += 1
        return unflatten_out(out, e.out_spec)

    def _run_segment(self, si):
        seg = self.stream.segments[si]
        self._seg_state[si] = False  # until it ran and its outputs passed the checks
        if seg.fn is None:
            raise _Missing("no compiled graph")
        nodes = self.stream.nodes
        inputs = []
        with torch._C.DisableTorchFunction():  # our reads are not the program's ops
            for r in seg.inputs:
                if type(r) is tuple:  # a lifted float of this call
                    inputs.append(torch.tensor(self._leaves[r[1]], dtype=torch.float64))
                    continue
                ref = self._env.get(r)
                t = ref() if ref is not None else None
                if t is None or raw_meta(t) != nodes[r].meta:
                    raise _Missing(f"input node {r}")
                inputs.append(t)
        outs = seg.fn(*inputs)
        if len(outs) != len(seg.outputs):
            raise _Missing("output count")
        with torch._C.DisableTorchFunction():
            seen = {raw_storage(t) for t in inputs}
            for r, t in zip(seg.outputs, outs):
                # Eager's strides (a later view may depend on them) and fresh memory (a
                # later write must not reach another tensor).
                if type(t) is not torch.Tensor or raw_meta(t) != nodes[r].meta:
                    raise _Missing(f"output node {r}")
                s = raw_storage(t)
                if s is None or s in seen:
                    raise _Missing(f"output node {r} shares memory")
                seen.add(s)
        self._pending.update(zip(seg.outputs, outs))
        self._seg_state[si] = True
        seg.failures = 0

    def _bind_real(self, e, out):
        if e.kind == RUN and not e.outs:
            return
        leaves, spec = flatten_out(out)
        if spec != e.out_spec:
            raise _Missing("result structure")
        for o, t in zip(e.outs, leaves):
            if o is not None and isinstance(t, torch.Tensor):
                self._env[o] = weakref.ref(t)


def _requires_grad(t):
    with torch._C.DisableTorchFunction():  # our read is not the program's op
        return t.requires_grad


# func -> whether it is a metadata read replay lets through (func_name costs per call)
_PASSES = {}


def _passes(func):
    try:
        hit = _PASSES.get(func)
    except TypeError:  # an unhashable callable
        return passes_through(*func_name(func))
    if hit is None:
        hit = _PASSES[func] = passes_through(*func_name(func))
    return hit


def _same(a, b):
    """Equal constants of the same type (a float nan equals nan; slices field by field)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, slice):
        return _same(a.start, b.start) and _same(a.stop, b.stop) and _same(a.step, b.step)
    try:
        return bool(a == b) is True
    except Exception:  # noqa: BLE001 - not comparable: not the same
        return False
