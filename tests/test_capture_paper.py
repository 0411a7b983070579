"""The MagPy paper's example programs (Figures 2, 3 and 9) under eagerc.capture.

Each test checks values and side effects against an eager run on copies of the same state,
and that a second call with the same state hits the record.
"""

import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats

BACKEND = "eager"  # runs the recorded FX graph as is: these tests check capture, not Inductor


def twice(fn, make_state, backend=BACKEND):
    """Run fn eagerly and captured (twice) on fresh copies of the state; return all three."""
    cap = capture(fn, backend=backend)
    eager_state, s1, s2 = make_state(), make_state(), make_state()
    with torch.no_grad():
        expected = fn(*eager_state)
        got1 = cap(*s1)
        got2 = cap(*s2)
    return cap, (expected, eager_state), (got1, s1), (got2, s2)


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert_close(a, b)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, torch.nn.Module):
        assert_same(vars(a), vars(b))
    else:
        assert a == b


def test_figure9_inplace_append_tuple():
    def f(x, y, z):
        x[0] += y
        x.append(x[0] * y)
        a = tuple(x)
        return a

    base = torch.rand(3, 3)
    cap, (e, es), (g1, s1), (g2, s2) = twice(f, lambda: ([base.clone()], 2.0, 3.0))
    for got, state in ((g1, s1), (g2, s2)):
        assert_same(e, got)
        assert_same(es[0], state[0])  # the external list after the call
        assert got[0] is state[0][0]  # the tuple holds the caller's tensor itself
    assert capture_stats(cap)["hits"] == 1 and capture_stats(cap)["misses"] == 1


GLOBAL_LIST = []
LAST_SHAPE = None


def test_figure2_builtins_and_oop():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 0.5
            self.dim = 1

        def forward(self, x, dims):
            out = x.permute(*dims) * self.scale
            out = torch.softmax(out, self.dim)
            global LAST_SHAPE
            LAST_SHAPE = tuple(out.shape)
            return out

    m = Model()
    cap = capture(m, backend=BACKEND)
    x = torch.randn(2, 3, 4)
    with torch.no_grad():
        GLOBAL_LIST.clear()
        expected = m(x, [2, 0, 1])
        eager_list = list(GLOBAL_LIST)
        GLOBAL_LIST.clear()
        assert_close(cap(x, [2, 0, 1]), expected)
        assert_close(cap(x, [2, 0, 1]), expected)
    assert GLOBAL_LIST == eager_list * 2  # the global side effect happens on every call
    assert capture_stats(cap)["hits"] == 1


def test_figure3_list_extend_generator_permute():
    def f(x):
        perm = [2, 1]
        perm.extend(i for i in range(x.dim()) if i not in perm)
        return x.permute(*perm)

    cap, (e, _), (g1, _), (g2, _) = twice(f, lambda: (torch.arange(24.).reshape(2, 3, 4),))
    assert_same(e, g1)
    assert_same(e, g2)
    assert capture_stats(cap)["hits"] == 1 and capture_stats(cap)["graphs"] == 1


def test_figure3_enumerate_start():
    blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def f(x):
        for i, block in enumerate(blocks, 2):
            x = block(x) * i
        return x

    cap, (e, _), (g1, _), (g2, _) = twice(f, lambda: (torch.ones(2, 4),))
    assert_same(e, g1)
    assert_same(e, g2)
    assert capture_stats(cap)["hits"] == 1


def test_figure3_size_numel():
    def f(x):
        return x * torch.Size(x.shape).numel()

    cap, (e, _), (g1, _), (g2, _) = twice(f, lambda: (torch.ones(2, 3),))
    assert_same(e, g1)
    assert_same(e, g2)
    assert capture_stats(cap)["hits"] == 1


class EqualLeakyReLU(torch.nn.LeakyReLU):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return super().forward(x) * self.scale


def test_figure3_super_forward():
    m = EqualLeakyReLU(3.0)
    cap = capture(m, backend=BACKEND)
    x = torch.randn(5)
    with torch.no_grad():
        assert_close(cap(x), m(x))
        assert_close(cap(x), m(x))
        m.scale = 4.0  # an attribute the run read: the guard must notice
        assert_close(cap(x), m(x))
    stats = capture_stats(cap)
    (failed, n), = stats.pop("guard_failures").items()  # the miss names the check
    assert n == 1 and ".scale != 3.0" in failed, failed
    assert stats | {"stop_reasons": {}} == {
        "hits": 1, "misses": 2, "graphs": 2, "graphs_from_disk": 0, "eager_runs": 0,
        "split_runs": 0, "segment_graphs": 0, "segment_runs": 0, "segment_ops": 0,
        "segment_divergences": 0, "value_misses": 0, "stop_reasons": {}, "records": 2,
        "training_graphs": 0, "stop_sites": {}}


class SideEffect(torch.nn.Module):
    def forward(self, inp, mask, dim):
        self.dim = dim
        output = inp.masked_fill(mask, -1e4)
        output = torch.softmax(output, self.dim)
        return output


def test_figure3_attribute_side_effect():
    m_eager, m_cap = SideEffect(), SideEffect()
    cap = capture(m_cap, backend=BACKEND)
    x = torch.randn(3, 4)
    mask = x > 0
    with torch.no_grad():
        expected = m_eager(x, mask, 1)
        assert_close(cap(x, mask, 1), expected)
        del m_cap.dim  # the mock must set it again
        assert_close(cap(x, mask, 1), expected)
        assert m_cap.dim == m_eager.dim == 1
        assert_close(cap(x, mask, 0), m_eager(x, mask, 0))
        assert m_cap.dim == 0
    st = capture_stats(cap)
    assert st["misses"] >= 2 and st["hits"] >= 1


def test_dict_and_new_object_side_effects():
    class Box:
        pass

    def f(d, x):
        d["out"] = x + 1
        b = Box()
        b.t = x * 2
        b.items = [x, d["out"]]
        d["box"] = b
        return b

    x = torch.randn(3)
    cap = capture(f, backend=BACKEND)
    with torch.no_grad():
        d1 = {}
        b1 = cap(d1, x)
        d2 = {}
        b2 = cap(d2, x)
    for d, b in ((d1, b1), (d2, b2)):
        assert d["box"] is b and type(b) is Box
        assert_close(d["out"], x + 1)
        assert_close(b.t, x * 2)
        assert b.items[0] is x and b.items[1] is d["out"]
    assert capture_stats(cap)["hits"] == 1


def test_inductor_backend_one_graph():
    def f(x, w):
        y = torch.nn.functional.linear(x, w).relu()
        return (y * 2 + 1).sum(-1)

    x, w = torch.randn(4, 8), torch.randn(6, 8)
    cap, (e, _), (g1, _), (g2, _) = twice(f, lambda: (x, w), backend=None)
    assert_same(e, g1)
    assert_same(e, g2)
    st = capture_stats(cap)
    assert st["graphs"] == 1 and st["hits"] == 1 and st["records"] == 1
