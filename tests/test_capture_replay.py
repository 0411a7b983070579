"""Counters and appends are replayed by the mock, not guarded (issue 12, replayed_updates.py): an
identical call hits instead of recording again, and the outside state ends as eager's."""
import operator

import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close

X = torch.randn(2, 4)


def calls(fn, *args, n=4):
    cap = capture(fn, backend="eager")
    with torch.no_grad():
        outs = [cap(*args) for _ in range(n)]
    return cap, outs


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


def test_module_counter_is_replayed():
    m = Counter()
    cap, outs = calls(m, X)
    assert m.calls == 4
    s = capture_stats(cap)
    assert (s["records"], s["graphs"], s["hits"]) == (1, 1, 3)
    assert_close(outs[-1], m.lin(X))


def test_counter_value_used_by_python_stays_guarded():
    class Gated(Counter):
        def forward(self, x):
            self.calls += 1
            return self.lin(x) * (2 if self.calls > 2 else 1)  # the value steers the result

    m = Gated()
    ref = Gated()
    ref.load_state_dict(m.state_dict())
    cap, outs = calls(m, X)
    with torch.no_grad():
        for out in outs:
            assert_close(out, ref(X))
    assert m.calls == 4 and capture_stats(cap)["records"] == 4


def test_counter_returned_stays_guarded():
    class Ret(Counter):
        def forward(self, x):
            self.calls = self.calls + 2
            return self.lin(x), self.calls

    m = Ret()
    cap, outs = calls(m, X)
    assert [o[1] for o in outs] == [2, 4, 6, 8]


LOG = []
STATS = {"n": 0}
COUNT = 0


def test_global_list_append_and_counters():
    def f(x, ys):
        global COUNT
        LOG.append(len(ys))
        STATS["n"] += 1
        COUNT += 1
        return x + len(ys)

    del LOG[:]
    cap, outs = calls(f, X, [1, 2, 3])
    assert LOG == [3, 3, 3, 3] and STATS["n"] == 4 and COUNT == 4
    s = capture_stats(cap)
    assert (s["records"], s["hits"]) == (1, 3)
    assert_close(outs[-1], X + 3)


def test_list_read_by_the_program_stays_guarded():
    seen = []

    def f(x):
        seen.append(x.shape[0])
        return x * len(seen)  # the length is read: not append-only

    cap, outs = calls(f, X, n=3)
    for i, out in enumerate(outs):
        assert_close(out, X * (i + 1))
    assert capture_stats(cap)["records"] == 3


def test_operator_index_counter():
    class Step(torch.nn.Module):
        step = 0

        def __init__(self):
            super().__init__()
            self.step = 0

        def forward(self, x):
            self.step = operator.index(self.step) + 1
            return x * 2

    m = Step()
    cap, _ = calls(m, X)
    assert m.step == 4 and capture_stats(cap)["records"] == 1


def test_counter_through_local_and_branch_is_guarded():
    class Local(Counter):
        def forward(self, x):
            n = self.calls
            n = n + 1 if n >= 0 else 0  # compared: guarded
            self.calls = n
            return self.lin(x)

    m = Local()
    cap, _ = calls(m, X)
    assert m.calls == 4

    class Plain(Counter):
        def forward(self, x):
            n = self.calls
            n = n * 2 + 1
            self.calls = n
            return self.lin(x)

    m = Plain()
    cap, _ = calls(m, X)
    assert m.calls == 15 and capture_stats(cap)["records"] == 1


class Cache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        self.cache["last"] = x * 2
        return self.cache["last"] + 1


def test_dict_used_by_key_gains_a_key_without_rerecord():
    m = Cache()
    cap, outs = calls(m, X)
    assert_close(m.cache["last"], X * 2)
    assert capture_stats(cap)["records"] == 1


def test_dict_keys_read_are_guarded():
    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = {"scale": 2.0, "unused": 1}

        def forward(self, x):
            try:
                shift = self.cfg["shift"]
            except KeyError:
                shift = 0.0
            return x * self.cfg["scale"] + shift

    m = Lookup()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        assert_close(cap(X), X * 2)
        m.cfg["unused"] = 5  # not read: still a hit
        assert_close(cap(X), X * 2)
        m.cfg["scale"] = 3.0  # read: a miss
        assert_close(cap(X), X * 3)
        m.cfg["shift"] = 1.0  # read as absent: a miss
        assert_close(cap(X), X * 3 + 1)
    s = capture_stats(cap)
    assert (s["records"], s["hits"]) == (3, 1)


def test_dict_used_whole_keeps_its_key_guard():
    class Count(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def forward(self, x):
            self.seen[len(self.seen)] = 1  # len(): the key set matters
            return x * len(self.seen)

    m, ref = Count(), Count()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        for _ in range(3):
            assert_close(cap(X), ref(X))


def test_counter_of_sizes_over_symbolic_records():
    class Sizes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n, self.seen = 0, []

        def forward(self, x):
            self.n += x.shape[0]  # a SymbolicInt after 3 records: baked, then replayed
            self.seen.append(x.shape[1])
            return x * 2

    m, ref = Sizes(), Sizes()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        for s in [2, 3, 4, 5, 6, 5, 6, 7, 7]:
            x = torch.randn(s, s + 1)
            assert_close(cap(x), ref(x))
    assert (m.n, m.seen) == (ref.n, ref.seen)
    s = capture_stats(cap)
    assert (s["records"], s["hits"]) == (6, 3)  # one per size, repeats hit
