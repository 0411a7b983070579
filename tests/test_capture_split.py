"""Partial capture (issue 12): when a call must stop (print, .item() feeding Python), later
calls run it eagerly but capture the calls of its child modules on their own."""
import io

import torch
import torch.nn as nn

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close

X = torch.randn(2, 8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.head = nn.Linear(8, 2)
        self.log = io.StringIO()

    def forward(self, x):
        h = self.enc(x)
        print("norm", round(h.norm().item(), 1), file=self.log)  # a stop: value to Python
        for blk in self.blocks:
            h = blk(h).tanh()
        return self.head(h)


def test_children_are_captured_around_a_stop():
    m = Net().eval()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        for i in range(4):
            assert_close(cap(X + i), m(X + i))
    s = capture_stats(cap)
    assert s["records"] == 1 and s["stop_reasons"] == {"impure call: builtins.print": 1}
    assert s["split_runs"] == 3
    split = s["split"]
    assert split["children"] == 4  # enc, blocks[0], blocks[1], head
    assert split["graphs"] == 4 and split["eager_runs"] == 0
    assert split["hits"] == 8  # the first split run records each child, two more hit
    assert "forward" not in m.enc.__dict__  # nothing left behind on the modules


def test_split_child_that_stops_splits_again():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            y = self.a(x)
            print("y", file=io.StringIO())  # a stop
            return self.b(y)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x).sum().item() + 1

    m = Outer().eval()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        for _ in range(4):
            assert cap(X) == m(X)
    s = capture_stats(cap)
    assert s["split"]["graphs"] == 2  # inner.a and inner.b, inside the inner split
