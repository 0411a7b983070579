"""Idioms of graph neural network code (torch_geometric's models and layers, run by
tools/capture_pyg.py) under capture, in plain torch: each is whole-graph on identical calls,
with results equal to eager's, also when the values Python read change."""
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


def _run(fn, calls):
    """Each argument tuple of `calls` under no_grad, compared with eager; returns stats."""
    captured = capture(fn, backend="eager")
    with torch.no_grad():
        for args in calls:
            assert_close(captured(*args), fn(*args))
    return capture_stats(captured)


def _whole_on_repeats(stats):
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["graphs"] == stats["records"] >= 1, stats


def _invert_mask_then_count(x, mask):
    # TopKPooling / GraphUNet: a mask of the input inverted, then its count read by Python
    keep = ~mask
    n = int(keep.sum())
    return x[keep] * 2 + n


def test_invert_of_an_input_is_no_write():
    """`~mask` on an argument writes nothing: a value read after it is checked after the
    graph (it used to count as a write into an outside tensor, which stops speculation)."""
    x = torch.randn(6, 3)
    mask = torch.tensor([True, False, False, True, False, False])
    mask2 = torch.tensor([False, False, True, True, True, False])
    stats = _run(_invert_mask_then_count, [(x, mask)] * 3 + [(x, mask2)] * 2)
    _whole_on_repeats(stats)
    assert stats["records"] == 2 and stats["value_misses"] == 1, stats
    assert not mask[1] and mask[0]  # the argument itself is untouched


def _consecutive_cluster(x, cluster):
    # torch_geometric.nn.pool.consecutive_cluster: new_empty filled by scatter_, then the
    # number of clusters read
    unique, inv = torch.unique(cluster, sorted=True, return_inverse=True)
    perm = torch.arange(inv.size(0))
    perm = inv.new_empty(unique.size(0)).scatter_(0, inv, perm)
    n = int(perm.max()) + 1
    return x[perm] + n


def test_new_empty_is_not_a_random_draw():
    """Uninitialized memory that the program overwrites draws no random numbers: values read
    after it are checked after the graph, not a stop."""
    x = torch.randn(5, 2)
    c = torch.tensor([0, 0, 2, 2, 4])
    stats = _run(_consecutive_cluster, [(x, c)] * 3)
    _whole_on_repeats(stats)
    assert stats["records"] == 1 and stats["hits"] == 2, stats


def test_inplace_operator_on_an_input_still_a_write():
    """`x += 1` on an argument is still a write into outside state: the read after it stops
    speculation and the call stays eager's (twice the same input: the write shows)."""
    def f(x):
        x += 1
        return x * int(x.sum() > 0)
    captured = capture(f, backend="eager")
    a, b = torch.ones(3), torch.ones(3)
    with torch.no_grad():
        for _ in range(3):
            assert_close(captured(a), f(b))
    assert_close(a, b)
    assert capture_stats(captured)["stop_reasons"], capture_stats(captured)


def test_lstm_trained_on_an_input_without_grad():
    """PyG's Set2Set: an LSTM whose input (zeros, then a readout) needs no grad while its
    weights do, in training: one training graph, gradients equal to eager's (PyTorch's LSTM
    decomposition took oneDNN's inference kernel there, and every hit failed)."""
    torch.manual_seed(0)
    lstm, lin = torch.nn.LSTM(8, 4), torch.nn.Linear(4, 4)

    def f(x):
        h = (x.new_zeros((1, 3, 4)), x.new_zeros((1, 3, 4)))
        out, _ = lstm(x.new_zeros(1, 3, 8), h)
        return lin(out[0]) + x[:3, :4]
    captured = capture(f, backend="eager")
    x = torch.randn(6, 8, requires_grad=True)
    params = [x, *lstm.parameters(), *lin.parameters()]
    for _ in range(3):
        ref = torch.autograd.grad(f(x).pow(2).sum(), params)
        got = torch.autograd.grad(captured(x).pow(2).sum(), params)
        assert_close(got, ref)
    stats = capture_stats(captured)
    assert stats["training_graphs"] == 1 and stats["hits"] == 2, stats
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
