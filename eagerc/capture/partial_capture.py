"""Partial capture: a call whose record stopped runs eagerly, and what can still be captured
of it is. The calls of its child modules are captured on their own (the stop costs the
code around the children, not the whole call; a child whose own capture stops splits into
its children the same way), and the call's own tensor ops run as compiled segment graphs:
the first such call records its op stream, later ones replay it (stream.py,
segment_graph.py, stream_replay.py). `Captured` keeps the child captures
(Captured.split_children, from `child_modules`); counters go to its CaptureStats."""
from eagerc import _config

from . import stream_replay
from .segment_graph import compile_stream
from .stream import StreamRecorder



def current_stream_mode():
    """The stream mode (recording or replaying) this thread is inside, or None."""
    return stream_replay.current()


def run(cap, state, args, kwargs, record=None):
    """Run a call of `cap` (a Captured) eagerly, with partial capture. `state.active` is
    the thread's "inside a capture" flag, cleared while the children's calls run (they
    are captures of their own); `record`: the eager record hit (None: a run that raised,
    no segments)."""
    children = cap.split_children()
    mode = _stream_mode(cap, record, args, kwargs)
    if not children and mode is None:
        return cap.fn(*args, **kwargs)
    if children:
        cap.stats.split_run()
    installed = []
    returned = False
    state.active = False  # the children's calls are captures of their own
    try:
        for module, captured in children:
            d = module.__dict__
            if "forward" not in d:  # the module's call (hooks included) reaches it
                d["forward"] = captured
                installed.append(module)
        if mode is None:
            return cap.fn(*args, **kwargs)
        with stream_replay.active(mode):
            result = cap.fn(*args, **kwargs)
        returned = True
        return result
    finally:
        for module in installed:
            module.__dict__.pop("forward", None)
        state.active = True
        if mode is not None:
            _stream_done(cap, record, mode, returned)


def _stream_mode(cap, record, args, kwargs):
    """The mode that records (first hit) or replays (later hits) the stopped call's op
    stream; None where there is none: no record (a run that raised), no split, grad
    mode (autograd is eager's), or a stream that could not be made."""
    import torch
    if record is None or not cap.split or cap.disabled or torch.is_grad_enabled():
        return None
    if not _config.capture_segments_enabled():
        return None  # stopped calls run eagerly (children still captured)
    stream = record.stream
    if stream is False:
        return None
    try:
        if stream is None:
            return StreamRecorder(args, kwargs)
        return stream_replay.StreamReplay(stream, args, kwargs)
    except Exception as e:  # noqa: BLE001 - the call runs eagerly as before
        cap.faults.segment_fault(record, e)
        return None


def _stream_done(cap, record, mode, returned):
    """After a recording: compile the segments; after a replay: count it, and record
    the stream again after replays that keep leaving it. Never fails the call."""
    stats = cap.stats
    try:
        if isinstance(mode, StreamRecorder):
            if not returned:
                return  # the program raised: the next such call records
            record.stream_recordings += 1
            stream = compile_stream(mode, cap.compiler.compile)
            record.stream = stream if stream is not None and stream.graph_ops() else False
            if record.stream:
                stats.segments_compiled(sum(1 for s in stream.segments if s.fn is not None))
            return
        stream = mode.stream
        stats.segment_run(mode.answered)
        if not mode.diverged and mode.i == len(stream.entries):
            stream.diverged_in_a_row = 0
            return
        if returned or mode.diverged:
            stats.segment_divergence()
            stream.diverged_in_a_row += 1
            if stream.diverged_in_a_row >= stream_replay.REPLAYS_BEFORE_RERECORD:
                # recorded on an unusual call: record again (a few times at most)
                record.stream = None if record.stream_recordings < 3 else False
    except Exception as e:  # noqa: BLE001 - see above
        cap.faults.segment_fault(record, e)


def child_modules(fn):
    """The child modules whose calls a split run of `fn` captures on their own (see
    `_called_children`); [] when `fn` is not a module or a module's method."""
    module = _module_of(fn)
    return _called_children(module) if module is not None else []


def _module_of(fn):
    import torch
    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _called_children(module):
    """Child modules a forward calls: direct children; containers without a forward of
    their own (ModuleList, ModuleDict) stand for their children. TorchScript children are
    not split off: they run inside the eager call as they are."""
    import torch
    seen, out = {id(module)}, []
    stack = list(module.children())[::-1]
    while stack:
        child = stack.pop()
        if id(child) in seen:
            continue
        seen.add(id(child))
        if isinstance(child, torch.jit.ScriptModule):
            continue  # TorchScript: its forward is compiled code (run as part of the call)
        if type(child).forward is torch.nn.Module.forward:  # no forward: a container
            stack.extend(list(child.children())[::-1])
        else:
            out.append(child)
    return out
