"""A recorded op stream's segments as FX graphs, compiled (stream.py records them,
stream_replay.py replays them).

A segment's graph takes the tensors made before it (and the float operands of the op at
which it runs, see `_lifted`) and returns the results of its GRAPH entries. Its VIEW
entries run for real in a replay, so that writes through a view reach its base, but later
ops of the segment use the graph's own value of them.
"""
import torch
import torch.fx as fx

from .fx_targets import as_graph_constant, fx_target
from .op_recorder import build_module
from .stream import GRAPH, Stream, unflatten_args

# Arithmetic whose float operand may be a 0-d float64 tensor instead: with floating-point
# tensor operands the result's dtype and the kernel's scalar path are the same.
_LIFTABLE = frozenset("""add sub mul div true_divide __add__ __radd__ __sub__ __rsub__
    __mul__ __rmul__ __truediv__ __rtruediv__""".split())


def compile_stream(recorder, compile_graph):
    """The stream `recorder` (a finished StreamRecorder) saw, each segment's graph compiled
    by `compile_graph(gm, example_inputs)`; None when no stream could be made (`failed`
    says why). A segment that fails to build or compile keeps its ops running for real."""
    if recorder.failed is not None:
        return None
    for seg in recorder.segments:
        try:
            gm, examples = _segment_graph(seg, recorder.entries, recorder.nodes)
        except Exception:  # noqa: BLE001 - this segment's ops run for real
            continue
        if gm is None:
            continue
        try:
            seg.fn = compile_graph(gm, examples)
        except Exception:  # noqa: BLE001 - as above
            seg.fn = None
    return Stream(recorder.nodes, recorder.entries, recorder.segments)


def _segment_graph(seg, all_entries, nodes):
    """(GraphModule, example inputs) of one segment; (None, None) if it has no GRAPH entry."""
    entries = [all_entries[i] for i in seg.entries]
    if not any(e.kind == GRAPH for e in entries):
        return None, None
    # The graph runs when its first GRAPH entry is called; the VIEW entries before it have
    # run for real by then, so their results are inputs (the tensors they were taken of may
    # be gone: `x = x.view(...)`).
    while entries[0].kind != GRAPH:
        entries.pop(0)
    g = fx.Graph()
    fxn = {}  # node id -> fx node
    lifted = entries[0].lifted = _lifted(entries[0], nodes)
    for e in entries:
        fx_leaves = []
        for i, (r, c) in enumerate(zip(e.refs, e.consts)):
            if r is None and e is entries[0] and i in lifted:
                fx_leaves.append(g.placeholder(f"in{len(seg.inputs)}"))
                seg.inputs.append(("scalar", i))
                continue
            if r is None:
                ok, value = as_graph_constant(c)
                fx_leaves.append(value if ok else c)
                continue
            if r not in fxn:
                fxn[r] = g.placeholder(f"in{len(seg.inputs)}")
                seg.inputs.append(r)
            fx_leaves.append(fxn[r])
        fx_args, fx_kwargs = unflatten_args(fx_leaves, e.spec)
        if e.is_getter:
            node = g.call_function(getattr, (fx_args[0], e.name))
        else:
            how, target = fx_target(e.func, e.name)
            node = (g.call_method if how == "call_method" else g.call_function)(
                target, tuple(fx_args), fx_kwargs)
        if e.out_spec is None:
            fxn[e.outs[0]] = node
        else:
            for i, o in enumerate(e.outs):
                if o is not None:
                    fxn[o] = g.call_function(_getitem, (node, i))
        if e.kind == GRAPH:
            seg.outputs.extend(o for o in e.outs if o is not None)
    gm = build_module(g, [fxn[o] for o in seg.outputs])
    examples = [torch.tensor(entries[0].consts[r[1]], dtype=torch.float64)
                if type(r) is tuple else _example(nodes[r].meta) for r in seg.inputs]
    return gm, examples


def _lifted(e, nodes):
    """Leaf positions of the float arguments of the segment's first GRAPH entry that become
    graph inputs: a value Python computed just before (`x / (m + 1)` after `m = t.item()`)
    changes between calls, and the graph runs at this very call, so it can take the
    value of each call instead of baking the recorded one."""
    if e.kind != GRAPH or e.name not in _LIFTABLE or e.is_getter:
        return frozenset()
    if any(r is not None and not nodes[r].meta[3].is_floating_point for r in e.refs):
        return frozenset()
    return frozenset(i for i, (r, c) in enumerate(zip(e.refs, e.consts))
                     if r is None and type(c) is float)


def _getitem(seq, i):
    return seq[i]


def _example(meta):
    """A tensor with the recorded sizes, strides, offset, dtype and device (the compiler
    reads only metadata)."""
    size, stride, offset, dtype, device = meta
    extent = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if all(size) else 0
    with torch._C.DisableTorchFunction():
        base = torch.empty(offset + extent, dtype=dtype, device=device)
        return base.as_strided(size, stride, offset)
