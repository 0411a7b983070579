"""Partial capture inside one forward (issue 12, item 4): a call whose record stopped runs
its Python code eagerly, and its own tensor ops before and after the stop run as compiled
segment graphs (eagerc/capture/stream.py, stream_replay.py). Results, graph counts and the
fraction of ops inside graphs; never a wrong value, never a new exception."""
import io

import numpy as np
import pytest
import torch
import torch.nn as nn

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


class Counting(torch.overrides.TorchFunctionMode):
    """Counts torch calls made inside captured graphs (its backend runs them op by op) and
    outside them (the program's own calls)."""

    def __init__(self):
        super().__init__()
        self.inside = self.outside = 0
        self.in_graph = False
        self.graphs = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.in_graph:
            self.inside += 1
        elif getattr(func, "__name__", "") not in ("size", "__get__", "dim", "shape"):
            self.outside += 1
        return func(*args, **(kwargs or {}))

    def backend(self, gm, example_inputs):
        self.graphs += 1

        def run(*inputs):
            self.in_graph = True
            try:
                return gm(*inputs)
            finally:
                self.in_graph = False
        return run


def run(fn, calls, backend="eager", measure_from=3):
    """eagerc.capture(fn) over `calls` (argument tuples), each result checked against
    eager's; the stats. With a Counting backend, it counts from call `measure_from` on."""
    counter = backend if isinstance(backend, Counting) else None
    cap = capture(fn, backend=counter.backend if counter is not None else backend)
    with torch.no_grad():
        refs = [fn(*args) for args in calls]
        for i, (args, ref) in enumerate(zip(calls, refs)):
            if counter is not None and i >= measure_from:
                with counter:
                    out = cap(*args)
            else:
                out = cap(*args)
            assert_close(out, ref)
    return cap, capture_stats(cap)


SINK = io.StringIO()


def item_to_python(x):
    m = (x * 2).max().item()
    print("max", m, file=SINK)  # a stop: I/O (the value read alone is checked, not a stop)
    return (x / (m + 1)).tanh() + 1


def test_ops_before_and_after_the_stop_run_in_graphs():
    x = torch.randn(4, 4)
    counter = Counting()
    cap, s = run(item_to_python, [(x,)] * 5, backend=counter)
    assert s["records"] == 1 and s["stop_reasons"] == {"impure call: builtins.print": 1}
    # call 1: monitor run (stops); call 2: records the stream; calls 3-5 replay it
    assert s["segment_graphs"] == 2  # mul+max before .item(), div+tanh+add after
    assert s["segment_runs"] == 3 and s["segment_ops"] == 3 * 5
    assert s["segment_divergences"] == 0
    assert counter.inside == 2 * 5 and counter.outside == 2 * 1  # .item() only, 5/6 inside


def test_segments_can_be_switched_off(monkeypatch):
    # EAGERC_CAPTURE_SEGMENTS=0: a stopped call runs eagerly, right, with no segment graph
    monkeypatch.setenv("EAGERC_CAPTURE_SEGMENTS", "0")
    cap, s = run(item_to_python, [(torch.randn(4, 4),)] * 5)
    assert s["records"] == 1 and s["stop_reasons"] == {"impure call: builtins.print": 1}
    assert s["segment_graphs"] == 0 and s["segment_runs"] == 0 and s["segment_ops"] == 0


def test_a_value_read_feeding_the_first_op_after_the_stop_is_a_graph_input():
    # m changes with the values; x / (m + 1) is the first op of its segment, whose graph
    # runs at that call: it takes this call's float (a 0-d float64 input)
    calls = [(torch.randn(8) + i,) for i in range(8)]
    cap, s = run(item_to_python, [calls[0]] * 3 + calls)
    assert s["segment_divergences"] == 0 and s["segment_ops"] == 5 * 9


def test_new_values_baked_into_a_later_op_leave_the_stream_and_stay_right():
    def f(x):
        m = x.max().item()
        print(m, file=SINK)  # a stop
        return x.tanh() / (m + 1)  # the float is baked into the second op after the stop
    calls = [(torch.randn(8) + i,) for i in range(8)]
    cap, s = run(f, [calls[0]] * 3 + calls)
    assert s["segment_divergences"] >= 1
    assert s["segment_ops"] >= 2  # the ops before the stop still ran in a graph


def test_data_dependent_branch_diverges_to_eager():
    def f(x):
        y = x.sin() * 2
        print("y", file=SINK)  # a stop
        if y.sum() > 0:
            return y.cos() + x
        return y.exp() - x
    pos, neg = torch.ones(5), -torch.ones(5)
    cap, s = run(f, [(pos,), (pos,), (pos,), (neg,), (pos,), (neg,), (neg,), (neg,)])
    assert s["segment_divergences"] >= 1 and s["segment_ops"] >= 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.head = nn.Linear(8, 2)
        self.log = io.StringIO()

    def forward(self, x):
        h = self.enc(x) * 0.5
        print("norm", round(h.norm().item(), 1), file=self.log)  # a stop
        for blk in self.blocks:
            h = blk(h).tanh() + h
        return self.head(h).softmax(-1)


def test_children_and_the_forwards_own_ops_around_a_stop():
    m = Net().eval()
    x = torch.randn(2, 8)
    counter = Counting()
    cap, s = run(m, [(x,)] * 5, backend=counter)
    assert s["split"]["graphs"] == 4  # enc, blocks[0], blocks[1], head: whole records
    # own code: mul+norm | tanh+add (after blocks[0]'s output) | tanh+add | softmax
    assert s["segment_graphs"] == 4
    assert s["segment_divergences"] == 0
    assert counter.outside == 2  # .item() of the two measured calls
    assert "forward" not in m.enc.__dict__


def test_writes_views_and_escapes_keep_eager_values():
    def f(x, buf):
        y = x * 2
        v = y[0]  # a view: runs for real, so the write below reaches y
        v.mul_(10)
        n = int(y.sum().item())
        buf.add_(y)  # an input written in place
        a = y.numpy()  # its memory handed to numpy: no graph answers after this
        a[1] = 7.0
        z = (y + n).relu()
        return z, y, buf.clone()
    x = torch.randn(3, 2)

    def calls():
        return [(x, torch.zeros(3, 2))] * 5
    eager_out = [f(*a) for a in calls()]
    cap = capture(f, backend="eager")
    with torch.no_grad():
        outs = [cap(*a) for a in calls()]
    for o, r in zip(outs, eager_out):
        assert_close(o, r)
    s = capture_stats(cap)
    assert s["segment_runs"] == 3 and s["segment_divergences"] == 0
    # x * 2 and y.sum(); y + n and relu come after the numpy() escape and run eagerly
    assert s["segment_ops"] == 3 * 2


def test_outputs_unlike_eager_strides_run_for_real():
    def f(x):
        n = x.sum().item()
        print(n, file=SINK)  # a stop
        return x.t() * n + 1  # eager keeps the transposed layout

    def contiguous_backend(gm, example_inputs):
        return lambda *a: tuple(o.contiguous() for o in gm(*a))
    x = torch.randn(3, 5)
    cap, s = run(f, [(x,)] * 5, backend=contiguous_backend)
    # x.sum() is answered; the ops after the stop fail the stride check and run eagerly
    assert s["segment_graphs"] == 2 and s["segment_ops"] == 3
    assert cap(x).stride() == f(x).stride()


def test_a_failing_segment_graph_never_reaches_the_program():
    def broken(gm, example_inputs):
        def run(*a):
            raise RuntimeError("compiled segment failed")
        return run
    cap, s = run(item_to_python, [(torch.randn(4),)] * 5, backend=broken)
    assert s["segment_ops"] == 0 and s["segment_runs"] == 3


def test_the_programs_own_exception_after_the_stop():
    def f(x, i):
        n = x.sum().item()
        y = x * n
        return y[i]  # IndexError for i out of range, from the program's own op
    x = torch.randn(4)
    cap = capture(f, backend="eager")
    with torch.no_grad():
        for _ in range(4):
            assert_close(cap(x, 1), f(x, 1))
        with pytest.raises(IndexError):
            cap(x, 9)
        assert_close(cap(x, 2), f(x, 2))


def test_random_ops_run_for_real():
    def f(x):
        n = x.abs().sum().item()
        return x * n + torch.rand(x.shape)

    x = torch.randn(4)
    cap = capture(f, backend="eager")
    with torch.no_grad():
        for _ in range(4):
            torch.manual_seed(3)
            got = cap(x)
            torch.manual_seed(3)
            assert_close(got, f(x))


def test_numpy_scalars_and_grad_mode():
    def f(x):
        n = x.max().item()
        print(n, file=SINK)  # a stop
        return x * np.float32(2.0) + n
    x = torch.randn(3)
    cap, s = run(f, [(x,)] * 4)
    assert s["segment_ops"] >= 2
    xg = torch.randn(3, requires_grad=True)
    out = cap(xg)  # grad mode: no stream, autograd is eager's
    out.sum().backward()
    assert xg.grad is not None


def test_a_childs_result_first_written_in_place_then_used_by_graph_ops():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)  # a captured child: a new tensor every call
            h.mul_(2)  # runs for real, and binds h for the ops after it
            print("h", file=SINK)  # a stop
            return (h + 1).relu() * h

    m = M().eval()
    cap, s = run(m, [(torch.randn(3, 4),)] * 5)
    assert s["segment_divergences"] == 0 and s["segment_ops"] == 3 * 3



def test_parameters_feed_segment_graphs_under_no_grad():
    lin = nn.Linear(4, 4).eval()  # its parameters require grad; no_grad: no matter

    def f(x):
        h = torch.nn.functional.linear(x, lin.weight, lin.bias).relu()
        print(h.mean().item(), file=SINK)  # a stop
        return (h + x).tanh()

    counter = Counting()
    cap, s = run(f, [(torch.randn(2, 4),)] * 5, backend=counter)
    assert s["segment_graphs"] == 2 and s["segment_divergences"] == 0
    assert counter.outside == 2  # .item() of the two measured calls


def test_memory_shared_with_numpy_ends_graph_answers():
    def f(x):
        arr = np.zeros(3, dtype=np.float32)
        t = torch.from_numpy(arr)  # t's memory is arr's
        y = (t + x).sin()
        print("y", file=SINK)  # a stop
        arr[0] = 5.0  # a write no torch call shows
        return (t + 1) * y

    x = torch.randn(3)
    cap, s = run(f, [(x,)] * 5)
    # from_numpy is no overridable torch call: t is a new object the stream does not know,
    # so the replay leaves the stream at its first use (equal to eager, nothing answered)
    assert s["segment_ops"] == 0
