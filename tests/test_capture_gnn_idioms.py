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


def test_inplace_operator_on_an_input_undone_on_a_miss():
    """`x += 1` on an argument is a write into outside state: a value read after it is
    checked after the graph, and a call whose value differs sees the write once (undone
    before the call runs again), as in eager."""
    def f(x):
        x += 1
        return x * int(x.sum() > 0)
    captured = capture(f, backend="eager")
    with torch.no_grad():
        for start in (1.0, 1.0, 1.0, -5.0, 1.0):
            a, b = torch.full((3,), start), torch.full((3,), start)
            assert_close(captured(a), f(b))
            assert_close(a, b)
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["value_misses"] == 1, stats


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


def _bn_then_count(bn):
    def f(x, batch):
        h = bn(x)  # training: running statistics and num_batches_tracked updated
        n = int(batch.max()) + 1  # graphs in the batch (PyG's global pooling)
        return torch.zeros(n, h.size(1)).index_add(0, batch, h)
    return f


def test_batchnorm_training_then_value_read():
    """BatchNorm in train mode writes its buffers; a value read after it is checked after
    the graph, the writes undone on a miss: running statistics equal eager's after calls
    whose values change (GPSConv, SGFormer: norm + pooling by batch)."""
    torch.manual_seed(0)
    bn_ref, bn = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    f_ref, f = _bn_then_count(bn_ref), _bn_then_count(bn)
    captured = capture(f, backend="eager")
    x = torch.randn(6, 3)
    b2, b3 = torch.tensor([0, 0, 0, 1, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2])
    with torch.no_grad():
        for batch in (b2, b2, b2, b3, b3, b2):
            assert_close(captured(x, batch), f_ref(x, batch))
    assert_close(bn.running_mean, bn_ref.running_mean)
    assert_close(bn.running_var, bn_ref.running_var)
    assert int(bn.num_batches_tracked) == int(bn_ref.num_batches_tracked) == 6
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["records"] == 2 and stats["value_misses"] == 1, stats


def test_functional_batch_norm_write_is_undone_on_a_miss():
    """`F.batch_norm(..., training=True)` on outside buffers writes them though its name
    does not say so: a miss after it must not apply the update twice."""
    rm, rv = torch.zeros(3), torch.ones(3)
    rm_ref, rv_ref = torch.zeros(3), torch.ones(3)

    def make(mean, var):
        def f(x):
            h = torch.nn.functional.batch_norm(x, mean, var, training=True, momentum=0.5)
            return h * 2 if bool(x.sum() > 0) else h
        return f
    captured = capture(make(rm, rv), backend="eager")
    ref = make(rm_ref, rv_ref)
    with torch.no_grad():
        for x in (torch.ones(4, 3), torch.ones(4, 3), -torch.ones(4, 3), torch.ones(4, 3)):
            x = x + torch.arange(12.).view(4, 3) / 10
            assert_close(captured(x), ref(x))
    assert_close(rm, rm_ref)
    assert_close(rv, rv_ref)
    assert capture_stats(captured)["value_misses"] >= 1, capture_stats(captured)


def _corrupt_then_count(x, batch):
    # DeepGraphInfomax's corruption (a random permutation of the nodes), then the number
    # of graphs in the batch read by Python (global pooling's dim_size)
    h = x[torch.randperm(x.size(0))] + 0.1 * torch.randn_like(x)
    n = int(batch.max()) + 1
    return torch.zeros(n, x.size(1)).index_add(0, batch, h)


def test_random_draws_then_value_read_rewound_on_a_miss():
    """A graph that draws from the CPU generator before a checked value read: the
    generator's state is restored on a miss, so every call draws exactly eager's numbers
    and leaves the generator where eager leaves it."""
    x = torch.randn(6, 3)
    b2, b3 = torch.tensor([0, 0, 0, 1, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2])
    captured = capture(_corrupt_then_count, backend="eager")
    with torch.no_grad():
        for batch in (b2, b2, b2, b3, b2):
            torch.manual_seed(7)
            ref = _corrupt_then_count(x, batch)
            after_ref = torch.rand(1)
            torch.manual_seed(7)
            assert_close(captured(x, batch), ref)
            assert_close(torch.rand(1), after_ref)
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["records"] == 2 and stats["value_misses"] == 1, stats


def test_draw_from_own_generator_then_value_read_stops():
    """A draw from a generator of the program's own cannot be rewound: the read stops."""
    gen = torch.Generator().manual_seed(0)
    gen_ref = torch.Generator().manual_seed(0)

    def make(g):
        def f(x):
            h = x + torch.rand(x.shape, generator=g)
            return h * int(h.sum() > 2)
        return f
    captured, ref = capture(make(gen), backend="eager"), make(gen_ref)
    with torch.no_grad():
        for _ in range(3):
            x = torch.ones(4)
            assert_close(captured(x), ref(x))
    assert capture_stats(captured)["stop_reasons"], capture_stats(captured)


def _undirected_scale(x, edge_index):
    # torch_geometric.utils.is_undirected: torch.equal of sorted index tensors
    row, col = edge_index
    fwd = torch.sort(row * 100 + col).values
    bwd = torch.sort(col * 100 + row).values
    return x * 2 if torch.equal(fwd, bwd) and fwd.equal(bwd) else x - 1


def test_torch_equal_is_a_checked_value_read():
    """`torch.equal` of tensors the call made gives Python a bool: checked after the graph
    (one record per outcome), not a stop."""
    x = torch.randn(4, 2)
    sym = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    directed = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    stats = _run(_undirected_scale, [(x, sym)] * 3 + [(x, directed)] * 2 + [(x, sym)])
    _whole_on_repeats(stats)
    assert stats["records"] == 2 and stats["value_misses"] == 1, stats


class _InnerOptimization(torch.nn.Module):
    """PyG's EquilibriumAggregation: the forward minimizes an energy by gradient steps
    taken with create_graph=True, through a child module, and is trained through them."""

    def __init__(self):
        super().__init__()
        self.potential = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(),
                                             torch.nn.Linear(8, 1))

    def forward(self, x):
        y = torch.zeros(x.size(0), 2, requires_grad=True)
        with torch.enable_grad():
            for _ in range(2):
                energy = self.potential(torch.cat([x, y], 1)).sum()
                grad = torch.autograd.grad(energy, y, create_graph=True)[0]
                y = y - 0.1 * grad
        return y


def test_gradients_of_gradients_through_a_captured_child():
    """A call that differentiates with create_graph=True: its children's training graphs
    keep eager autograd (AOTAutograd's backward cannot be differentiated again), so the
    training step's gradients equal eager's instead of raising in backward."""
    torch.manual_seed(0)
    ref = _InnerOptimization()
    m = _InnerOptimization()
    m.load_state_dict(ref.state_dict())
    captured = capture(m, backend="eager")
    x = torch.randn(4, 3)
    for _ in range(4):
        ref.zero_grad()
        m.zero_grad()
        ref(x).pow(2).sum().backward()
        captured(x).pow(2).sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            assert_close(p.grad, q.grad)
