"""The op stream of a stopped call, cut into segments (partial capture inside one forward).

A call whose record stopped (`print`, `.item()` feeding Python) runs its Python code eagerly
on every hit: no guard can stand for what Python does with the value. Its tensor ops need
not run one by one, though. The first hit of such a record runs under `StreamRecorder`, a
TorchFunctionMode that lets every call happen for real and writes down what it was: the
function, its constant arguments, which earlier tensor each tensor argument was, and what it
returned. The list is cut into *segments*: runs of pure ops (no write into a tensor, nothing
random, no value read) whose tensor inputs all exist when the segment's first op is called.
Each segment becomes one FX graph, compiled like a record's graph (segment_graph.py). Later
hits replay the stream (stream_replay.py): the first op of a segment runs the compiled graph,
and the ops after it are answered from its outputs while the program calls exactly the
recorded ops.

Where the tensors come from (`Node.kind`):
- "arg": reached from the call's arguments (bound by path when a hit starts);
- "ext": any other tensor from outside the call (parameters, buffers, cached constants),
  held weakly and bound by identity: a hit that passes another object diverges;
- "fresh": returned by a captured child call (a child module split off, partial_capture.py), a
  new object each call: bound when first used, so it may only feed a segment's first op;
- "op": made by an op of the stream.
"""
import weakref

import torch

from .fx_targets import as_graph_constant
from .torch_calls import (CONSTANTS, META, NONDETERMINISTIC, STRIDE_META, VALUE_READS,
                          VIEW_ATTRS, tensors_in, written_tensor, func_name)

# Calls that share a tensor's memory with something that is not a tensor (a numpy array,
# a pointer, a buffer): a write through it is no torch call, so no op after one is
# answered from a precomputed graph.
_ESCAPES = frozenset("""numpy __array__ data_ptr untyped_storage storage __dlpack__ _base
    from_numpy as_tensor asarray frombuffer from_dlpack from_file""".split())
_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) \
    if hasattr(torch.nn, "Buffer") else (torch.Tensor, torch.nn.Parameter)

GRAPH, VIEW, RUN = "graph", "view", "run"  # Entry.kind


def passes_through(name, is_getter):
    """Metadata reads (sizes, dtype, strides): answered for real, not entries of the stream.
    They neither make nor change a tensor, so replay does not have to see them."""
    if name in META or name in STRIDE_META:
        return True
    return is_getter and name in ("requires_grad", "is_leaf", "grad_fn", "layout")


class Node:
    """One tensor of the stream."""

    __slots__ = ("kind", "path", "ref", "meta", "avail", "seg")

    def __init__(self, kind, tensor, avail, seg=-1, path=None):
        self.kind = kind
        self.path = path  # "arg": ("a", i) or ("k", name), then container indexes
        self.ref = weakref.ref(tensor) if kind == "ext" else None
        self.meta = meta_of(tensor)
        # Index of the entry from which the tensor exists in a replay (-1: when it starts;
        # a "fresh" one: its first use).
        self.avail = avail
        self.seg = seg  # segment of the entry that made it (-1: none)


class Entry:
    """One torch call: the function, the pytree of its arguments (`refs[i]`: node of a
    tensor leaf, else `consts[i]`), and the nodes of its tensor results."""

    __slots__ = ("func", "name", "is_getter", "kind", "spec", "refs", "consts",
                 "out_spec", "outs", "seg", "binds", "lifted")

    def __init__(self, func, name, is_getter, kind, spec, refs, consts):
        self.func, self.name, self.is_getter, self.kind = func, name, is_getter, kind
        self.spec, self.refs, self.consts = spec, refs, consts
        self.out_spec, self.outs, self.seg = None, [], -1
        self.binds = ()  # leaf positions of "fresh" tensors first used here
        self.lifted = frozenset()  # leaf positions of floats its segment's graph takes


class Segment:
    """Entries of one compiled graph; inputs and outputs are node ids."""

    def __init__(self, start):
        self.start = start  # index of its first entry
        self.entries = []
        # inputs: node ids, or ("scalar", leaf position) for a float argument of the first
        # GRAPH entry, passed as a 0-d float64 tensor (see _lifted)
        self.inputs, self.outputs = [], []
        self.fn = None  # the compiled graph; None: its ops run for real
        self.failures = 0


class Stream:
    """What `StreamRecorder` saw, ready to replay."""

    def __init__(self, nodes, entries, segments):
        self.nodes, self.entries, self.segments = nodes, entries, segments
        self.diverged_in_a_row = 0  # replays that left the stream (see stream_replay.py)

    def graph_ops(self):
        return sum(1 for e in self.entries if e.kind == GRAPH and
                   self.segments[e.seg].fn is not None)


def meta_of(t):
    """Sizes, strides, offset, dtype, device (read past torch-function modes: a mode
    under ours, such as a user's op counter, must not see the replay's own reads)."""
    with torch._C.DisableTorchFunction():
        return raw_meta(t)


def raw_meta(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device)


def storage_of(t):
    """Address of a tensor's memory; None when it has none (empty, or no storage)."""
    with torch._C.DisableTorchFunction():
        return raw_storage(t)


def raw_storage(t):
    try:
        return t.untyped_storage().data_ptr() or None
    except Exception:  # noqa: BLE001 - e.g. a subclass without storage
        return None


def _simple(value):
    """Constants a graph can embed and a replay can compare by value."""
    if type(value) in CONSTANTS or value is None or value is Ellipsis or \
            type(value) is torch.Size:
        return True
    if isinstance(value, slice):
        return all(_simple(v) for v in (value.start, value.stop, value.step))
    return as_graph_constant(value)[0]


def flatten_args(args, kwargs):
    """(leaves, spec) of a call's arguments: tuples and lists are opened, anything else is
    a leaf. Cheaper than torch's pytree, which a replay would pay on every op."""
    leaves = []
    if kwargs:
        spec = (_walk(args, leaves), tuple(kwargs), _walk(tuple(kwargs.values()), leaves))
    else:
        spec = (_walk(args, leaves),)
    return leaves, spec


def _walk(v, leaves):
    t = type(v)
    if t is tuple or t is list:
        return t, tuple([_walk(x, leaves) for x in v])
    leaves.append(v)
    return None


def unflatten_args(leaves, spec):
    it = iter(leaves)
    args = _build(spec[0], it)
    kwargs = dict(zip(spec[1], _build(spec[2], it))) if len(spec) > 1 else {}
    return args, kwargs


def _build(spec, it):
    if spec is None:
        return next(it)
    t, kids = spec
    return t([_build(k, it) for k in kids])


def flatten_out(out):
    """(leaves, spec) of a result: a tuple or list (torch.return_types too) is opened."""
    if isinstance(out, (tuple, list)):
        return list(out), (type(out), len(out))
    return [out], None


def unflatten_out(leaves, spec):
    return leaves[0] if spec is None else spec[0](leaves)


def arg_paths(args, kwargs):
    """id(tensor) -> (tensor, path) for tensors in the arguments (containers two deep)."""
    out = {}

    def walk(v, path, depth):
        if isinstance(v, torch.Tensor):
            out.setdefault(id(v), (v, path))
        elif depth and isinstance(v, (tuple, list)):
            for i, item in enumerate(v):
                walk(item, path + (i,), depth - 1)
        elif depth and type(v) is dict:
            for k, item in v.items():
                walk(item, path + (k,), depth - 1)
    for i, a in enumerate(args):
        walk(a, ("a", i), 2)
    for k, a in kwargs.items():
        walk(a, ("k", k), 2)
    return out


def resolve_path(path, args, kwargs):
    v = args[path[1]] if path[0] == "a" else kwargs[path[1]]
    for key in path[2:]:
        v = v[key]
    return v


class StreamRecorder(torch.overrides.TorchFunctionMode):
    """Records the op stream of one eager run of a stopped call. Every call is the
    program's own, made once; a fault of the recording ends the recording, never the call."""

    def __init__(self, args, kwargs):
        super().__init__()
        self.paused = 0  # > 0 while a captured child call runs (its ops are its own)
        self.failed = None  # why no stream can be made of this run
        self.nodes, self.entries, self.segments = [], [], []
        self._ids = {}  # id(tensor) -> (weakref, node id): tensors die, ids are reused
        self._args = arg_paths(args, kwargs)
        self._open = None  # the segment new pure ops join
        self._escaped = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused or self.failed is not None:
            return func(*args, **kwargs)
        try:
            name, is_getter = func_name(func)
            passes = passes_through(name, is_getter)
            if not passes:
                leaves, spec = flatten_args(args, kwargs)
                before = _versions(leaves)
        except Exception as e:  # noqa: BLE001 - the recording ends; the call happens
            self.failed = f"recording: {type(e).__name__}"
            return func(*args, **kwargs)
        if passes:
            return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
        except BaseException:
            self.failed = "the program's call raised"  # no stream of a run that raised
            raise
        try:
            with torch._C.DisableTorchFunction():  # our reads are not the program's ops
                self._record(func, name, is_getter, args, kwargs, leaves, spec, before, out)
        except Exception as e:  # noqa: BLE001 - see above
            self.failed = f"recording: {type(e).__name__}: {e}"
        return out

    def note_fresh(self, result):
        """Tensors a captured child call returned: new objects on every call."""
        if self.paused or self.failed is not None:
            return
        for t in tensors_in(result, 3):
            if self._lookup(t) is None:
                self._bind(t, Node("fresh", t, avail=None))

    # -- recording ------------------------------------------------------------------------
    def _record(self, func, name, is_getter, args, kwargs, leaves, spec, before, out):
        index = len(self.entries)
        refs, consts = [], []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                refs.append(self._node_for(leaf, index))
                consts.append(None)
            else:
                refs.append(None)
                consts.append(leaf)
        out_leaves, out_spec = flatten_out(out)
        kind = self._kind(name, is_getter, leaves, before, out, out_leaves, spec)
        e = Entry(func, name, is_getter, kind, spec, refs, consts)
        e.out_spec = out_spec
        if kind == RUN:
            self._open = None
        else:
            if self._open is None or not self._joins(refs):
                self._open = len(self.segments)
                self.segments.append(Segment(index))
            e.seg = self._open
            self.segments[e.seg].entries.append(index)
        binds = []
        for i, r in enumerate(refs):
            if r is not None and self.nodes[r].avail is None:
                self.nodes[r].avail = index  # a fresh tensor: bound at its first use
                binds.append(i)
        e.binds = tuple(binds)
        for o in out_leaves:
            if isinstance(o, torch.Tensor):
                e.outs.append(self._bind(o, Node("op", o, avail=index, seg=e.seg)))
            else:
                e.outs.append(None)
        self.entries.append(e)
        if name in _ESCAPES or any(type(v).__module__ == "numpy" and hasattr(v, "__array__")
                                   for v in leaves):
            self._escaped = True

    def _kind(self, name, is_getter, leaves, before, out, out_leaves, spec):
        """RUN: the call runs for real in a replay and ends the segment (writes, randomness,
        value reads, results that are not tensors); VIEW: runs for real, since its result
        shares memory with an input, but its value is a node of the segment's graph too;
        GRAPH: answered from the segment's compiled graph."""
        if self._escaped or name in VALUE_READS or name in NONDETERMINISTIC or \
                name in ("__iter__", "__setitem__", "__set__", "__delete__") or before is None:
            return RUN
        if is_getter and name not in VIEW_ATTRS:
            return RUN
        args, kwargs = unflatten_args(leaves, spec)
        if written_tensor(name, args, kwargs) is not None or _versions(leaves) != before:
            return RUN
        tensor_args = [t for t in leaves if isinstance(t, torch.Tensor)]
        grad = torch.is_grad_enabled()  # (parameters require grad; under no_grad no matter)
        if any(type(t) not in _TENSOR_TYPES or t.layout != torch.strided or
               grad and t.requires_grad for t in tensor_args):
            return RUN
        if not all(isinstance(t, torch.Tensor) or _simple(t) for t in leaves):
            return RUN
        if not _flat_tensors(out, out_leaves):
            return RUN
        mem = {storage_of(t) for t in tensor_args}
        for o in out_leaves:
            if o is None:
                continue
            if o.requires_grad or self._lookup(o) is not None:
                return VIEW
            s = storage_of(o)
            if s is None or s in mem:
                return VIEW
        return GRAPH

    def _joins(self, refs):
        """Whether a pure op can join the open segment: each tensor input is made inside
        it, or exists when the segment starts (its graph runs at its first op)."""
        start = self.segments[self._open].start
        for r in refs:
            if r is None:
                continue
            n = self.nodes[r]
            if n.seg == self._open:
                continue
            if n.avail is None or n.avail >= start:
                return False
        return True

    def _node_for(self, t, index):
        nid = self._lookup(t)
        if nid is not None:
            return nid
        hit = self._args.get(id(t))
        if hit is not None and hit[0] is t:
            return self._bind(t, Node("arg", t, avail=-1, path=hit[1]))
        return self._bind(t, Node("ext", t, avail=-1))

    def _lookup(self, t):
        hit = self._ids.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        return None

    def _bind(self, t, node):
        self.nodes.append(node)
        nid = len(self.nodes) - 1
        key = id(t)
        self._ids[key] = (weakref.ref(t, lambda _, key=key, nid=nid: self._forget(key, nid)),
                          nid)
        return nid

    def _forget(self, key, nid):
        hit = self._ids.get(key)
        if hit is not None and hit[1] == nid:
            del self._ids[key]


def _flat_tensors(out, out_leaves):
    """A tensor, or a flat tuple/list (or torch.return_types) of tensors and Nones."""
    if isinstance(out, torch.Tensor):
        return type(out) is torch.Tensor
    if not isinstance(out, (tuple, list)) or len(out) != len(out_leaves):
        return False
    return all(o is None or type(o) is torch.Tensor for o in out) and \
        any(o is not None for o in out)


def _versions(leaves):
    """Version counters of the tensor leaves (a write bumps them); None when one cannot be
    read (inference tensors keep none)."""
    try:
        with torch._C.DisableTorchFunction():
            return tuple(t._version for t in leaves if isinstance(t, torch.Tensor))
    except Exception:  # noqa: BLE001 - unknown: the op counts as a write
        return None
