"""Tensor values read by Python, checked after the graph instead of stopping capture.

`n = lengths.max().item(); assert n <= slen` (XLM, Flaubert), `sizes = counts.tolist()`
(JetMoE's routing), `if x.sum() > 0:`: the program's Python code depends on a tensor's
value, which no guard can see before the call runs. A monitor run that may speculate does
not stop at such a read: the value is the program's own (the real call), it is remembered
with the tensor's graph node, and the run goes on with it as a constant. The record's graph
gets the read tensor as an extra output, and its mock checks, right after the graph ran and
before any update of outside state, that the value is the recorded one (`values_ok`). A
different value raises `ValueMiss`: the call is served by another record whose check passes,
or runs like a miss (value_misses.py). A record is correct exactly when its values repeat, and
its graph has no effect before the check: records whose graph writes into an input are not
made this way (the run stops at the read, as before).
"""
import torch

from .capture_stop import CaptureStop
from .torch_calls import storage_id, tensors_in

# Reads that give a Python number, bool or list of them; other value reads (numpy,
# data_ptr, printing) still stop capture.
SPECULATED = frozenset("item tolist __bool__ __int__ __float__ __index__".split())
# The shape of a result that depends on tensor values (nonzero, unique, `x[mask]`), checked
# the same way (shape_read).
SHAPE_READ = "shape"
MAX_VALUE_MISSES = 3  # calls no record's values matched, before a function stops speculating
UNDO_LIMIT = 16 * 2 ** 20  # bytes of written inputs a record copies before its graph, at most


class ValueMiss(Exception):
    """A record's graph computed another value than the one its run read."""


def read_value(recorder, name, args, kwargs, call):
    """The value of `args[0].<name>()` for a monitor run that speculates (remembered on the
    recorder), or None when this read cannot be speculated (then capture stops)."""
    t = args[0] if args else None
    if not isinstance(t, torch.Tensor) or len(args) != 1 or kwargs:
        return None
    node = recorder.nodes.get(id(t))
    if node is None or node.op == "placeholder":
        return None  # an outside tensor's value: the guard would have to read it
    out = call(args, kwargs)
    if not _plain(out):
        recorder.monitor.stop(f"tensor value read: Tensor.{name}")
        return out
    # The graph returns a copy made at the read: a later in-place op on the tensor (run op
    # by op by the eager backend) must not change what is checked.
    snapshot = recorder.graph.call_method("clone", (node,))
    recorder.speculated.append((snapshot, name, out))
    return out


def equal_as_tensor(a, b):
    """`torch.equal(a, b)` (same dtype and device) as a 0-d bool tensor: the graph value
    whose truth the mock checks."""
    if a.shape != b.shape:
        return torch.zeros((), dtype=torch.bool, device=a.device)
    return (a == b).all()


def stop_reason(name):
    """Why a run whose graph writes or draws stops at a read it cannot check."""
    return "data-dependent output shape" if name == SHAPE_READ else \
        f"tensor value read: Tensor.{name}"


def eval_dropout(name, args, kwargs):
    """`F.dropout(x, p, training=False)` (a model in eval mode) and a dropout with `p=0`
    (ATen returns the input without drawing: a model trained with dropout off) draw no
    random numbers, so values read after it can be checked."""
    if "dropout" not in name:
        return False
    training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
    p = kwargs.get("p", args[1] if len(args) > 1 else None)
    # (native_dropout draws its mask even for p=0)
    return training is False or (type(p) in (int, float) and p == 0 and
                                 name != "native_dropout")


def _plain(value, depth=4):
    if type(value) in (bool, int, float):
        return True
    return depth > 0 and type(value) is list and all(_plain(v, depth - 1) for v in value)


def values_ok(outputs, expected):
    """Whether each read tensor among the graph's `outputs` gives its recorded value:
    `expected` holds (output index, read name, value). Same type and equal (a nan is
    never equal: such a record always misses, which is safe)."""
    for i, name, value in expected:
        t = outputs[i]
        got = bool(t) if name == "__bool__" else tuple(t.shape) if name == SHAPE_READ \
            else getattr(t, name)()
        if type(got) is not type(value) or got != value:
            return False
    return True


def undo_inputs(recorder):
    """Indices of the graph inputs whose memory the graph writes (BatchNorm's running
    statistics and `num_batches_tracked` in training), when copies taken before the graph
    can undo those writes on a miss; None when they cannot (a write into memory no input
    holds, or more than UNDO_LIMIT bytes): then the run stops at the read."""
    if recorder.random_elsewhere or None in recorder.written_storages:
        return None
    out, seen, size = [], set(), 0
    for i, (sn, _) in enumerate(recorder.placeholders):
        storage = storage_id(sn.obj) if isinstance(sn.obj, torch.Tensor) else None
        if storage is not None and storage in recorder.written_storages and storage not in seen:
            seen.add(storage)
            out.append(i)
            size += sn.obj.untyped_storage().nbytes()
    return out if seen == recorder.written_storages and size <= UNDO_LIMIT else None


def save(tensors, rng=False):
    """Copies of the whole memory of the inputs the graph writes, and with `rng` the CPU
    generator's state (the graph draws random numbers: dropout in training, a random
    permutation), taken before the graph runs. A miss restores them, so the call run again
    draws what eager draws."""
    saved = [(t.untyped_storage(), t.untyped_storage().clone()) for t in tensors]
    return saved + [(None, torch.get_rng_state())] if rng else saved


def _undo(saved):
    for storage, copy in saved:
        if storage is None:
            torch.set_rng_state(copy)
        else:
            storage.copy_(copy)


def run(graph, *inputs, undo=()):
    """The graph of a record with checked values. It has no effect outside itself (writes
    into inputs are undone from `undo`, `save`'s copies), so an error inside it is another
    value too: a size computed from a read value that differs now (FastSpeech2's durations
    fill a slice the recorded values sized)."""
    try:
        return graph(*inputs)
    except Exception as e:  # noqa: BLE001 - the call is served another way, or monitored
        _undo(undo)
        raise ValueMiss from e


def check(outputs, expected, undo=()):
    # Our reads, not the program's: a TorchFunctionMode of the user's does not see them.
    with torch._C.DisableTorchFunction():
        if not values_ok(outputs, expected):
            _undo(undo)
            raise ValueMiss


def shape_read(recorder, name, out):
    """A result whose shape depends on tensor values (nonzero, unique, `x[mask]`): later ops
    may bake it. In a run that speculates, the shape is checked after the graph like a value
    Python read; otherwise capture stops."""
    if recorder.monitor.speculate and not recorder.symbolic:
        for o in tensors_in(out):
            if id(o) in recorder.nodes:
                recorder.speculated.append((recorder.nodes[id(o)], SHAPE_READ, tuple(o.shape)))
        return
    recorder.monitor.stop(f"data-dependent output shape: {name}")


def outside_value(recorder, name, args, kwargs, call):
    """`if self.initted:` on a small CPU buffer kept as a flag or counter (state, not an
    argument): the guard checks the value, as it checks a Python value the run read
    (guards.value_differs), when nothing in this run wrote the tensor's memory before the
    read. Else None (the caller stops)."""
    t = args[0] if len(args) == 1 and not kwargs else None
    if not isinstance(t, torch.Tensor):
        return None
    node = recorder.nodes.get(id(t))
    if node is None:  # read before any op used it: a graph input, so the guard has it
        try:
            node = recorder._placeholder(t)
        except CaptureStop:
            return None
    if node.op != "placeholder" or t.numel() > 16 or t.device.type != "cpu" or \
            storage_id(t) is None or storage_id(t) in recorder.written_storages:
        return None
    sn = next((sn for sn, n in recorder.placeholders if n is node), None)
    if sn is None or recorder.monitor.from_args(sn):
        # (an argument's value, e.g. a diffusion timestep, changes from call to call: a
        # record per value would make most calls monitor runs)
        return None
    out = call(args, kwargs)
    if type(out) in (bool, int, float) or type(out) is list and all(
            type(v) in (bool, int, float) for v in out):
        recorder.monitor.value_guards.setdefault(sn.node_id, []).append((name, out))
    else:
        recorder.monitor.stop(f"tensor value read: Tensor.{name}")
    return out
