"""Whole-program capture after MagPy (USENIX ATC'24): monitor a real run, record a RefGraph,
and turn the run into guard + mock + one operator graph compiled as a unit.

The monitor, RefGraph and record builder load on the first call of :func:`capture`, not at
``import eagerc``: this module holds only the entry points.

    >>> import torch
    >>> from eagerc.capture import capture, capture_stats
    >>> double = capture(lambda x: x * 2, backend="eager")
    >>> double(torch.ones(2)).tolist()
    [2.0, 2.0]
"""

__all__ = ["capture", "capture_stats"]


def capture(fn=None, *, dynamic=None, backend=None):
    """Capture whole calls of `fn` (a function or nn.Module) into guarded compiled records.

    The first call with new external state runs `fn` under the monitor and makes a record
    (guard + mock + one operator graph, compiled by TorchInductor); later calls whose guard
    passes run the mock. Calls that cannot be captured run eagerly, and the reason is counted
    (see `capture_stats`). `backend` is "inductor" (default), "eager" (run the recorded FX
    graph as is) or a callable `(gm, example_inputs) -> fn`. `dynamic`: None lifts float
    arguments to graph inputs and compiles new records with symbolic sizes for the argument
    tensors' dims (sizes Python reads are recorded as graph values), once the function has
    3 records; True at once; False never (see docs/capture.md). With grad mode on and an
    input (a parameter) requiring grad, the graph is compiled for training (forward and
    backward through AOTAutograd, as torch.compile does): `backward()` on the result runs
    the compiled backward.

    >>> import torch, eagerc
    >>> f = eagerc.capture(lambda x, s: torch.relu(x) * s, backend="eager")
    >>> x = torch.randn(4)
    >>> torch.equal(f(x, 2.0), torch.relu(x) * 2.0), torch.equal(f(x, 2.0), torch.relu(x) * 2.0)
    (True, True)
    >>> eagerc.capture_stats(f)["hits"]
    1
    """
    from eagerc.capture import api

    return api.capture(fn, dynamic=dynamic, backend=backend)


def capture_stats(captured):
    """Counters of a captured function: records, hits, misses, graphs (compiled graphs),
    graphs_from_disk (of those, loaded from kernel_cache without compiling), training_graphs
    (of those, compiled for training: forward and backward through AOTAutograd), eager_runs,
    split_runs (eager runs whose child modules' calls were captured on their own; then
    `split` sums the children's counters), segment_graphs / segment_runs / segment_ops /
    segment_divergences (a stopped call's own ops as compiled segments: graphs compiled,
    eager runs that replayed them, ops answered from them, replays that left the recorded
    op stream), value_misses (calls whose tensor values, read by Python and checked after
    the graph, matched no record's), stop_reasons (reason -> count; internal
    faults of capture count as "internal error in <stage>", a call the program ended with
    an exception as "program raised: <type>"), stop_sites (reason -> {"file:line" of the
    program's instruction where capture stopped: count}) and guard_failures (per miss while
    records exist: the first failing check of the most recently matched record's guard, its
    variables spelled as access paths, with the value the call has now and where the
    program read it -> count).

    >>> import eagerc
    >>> sorted(eagerc.capture_stats(eagerc.capture(abs)))
    ['eager_runs', 'graphs', 'graphs_from_disk', 'guard_failures', 'hits', 'misses', 'records', 'segment_divergences', 'segment_graphs', 'segment_ops', 'segment_runs', 'split_runs', 'stop_reasons', 'stop_sites', 'training_graphs', 'value_misses']
    """
    from eagerc.capture import api

    return api.capture_stats(captured)
