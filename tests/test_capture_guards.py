"""Guard behaviour: what makes a captured call miss (monitor again) and what lets it hit."""
import pytest
import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats


def stats(cap):
    s = capture_stats(cap)
    return s["hits"], s["misses"]


def calls(fn, *arg_lists):
    """Capture fn, call it on each argument tuple, check each result against eager."""
    cap = capture(fn, backend="eager")
    with torch.no_grad():
        for args in arg_lists:
            assert_close(cap(*args), fn(*args))
    return cap


def f_scale(x, s):
    return (x * s).sum(0)


X = torch.randn(3, 4)


def test_same_inputs_hit():
    cap = calls(f_scale, (X, 2.0), (X, 2.0), (X.clone(), 2.0))
    assert stats(cap) == (2, 1)


def test_changed_shape_misses():
    cap = calls(f_scale, (X, 2.0), (torch.randn(5, 4), 2.0))
    assert stats(cap) == (0, 2)


def test_changed_dtype_misses():
    cap = calls(f_scale, (X, 2.0), (X.double(), 2.0))
    assert stats(cap) == (0, 2)


def test_changed_strides_of_a_graph_input_miss():
    cap = calls(f_scale, (X, 2.0), (X.t().contiguous().t(), 2.0))
    assert stats(cap) == (0, 2)


def test_changed_scalar_value_misses():
    cap = calls(f_scale, (X, 2.0), (X, 3.0), (X, 2.0))
    assert stats(cap) == (1, 2)  # the third call finds the first record again


def test_scalar_type_is_guarded():
    cap = calls(f_scale, (X, 2), (X, 2.0))
    assert stats(cap) == (0, 2)


def f_list(xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def test_changed_list_length_misses():
    cap = calls(f_list, ([X, X],), ([X, X, X],), ([X, X],))
    assert stats(cap) == (1, 2)


def test_aliasing_is_guarded():
    def f(a, b):
        a.mul_(2)
        return a + b

    cap = capture(f, backend="eager")
    x1, y1 = torch.ones(3), torch.ones(3)
    with torch.no_grad():
        assert_close(cap(x1, y1), torch.full((3,), 3.0))
        z = torch.ones(3)
        assert_close(cap(z, z), torch.full((3,), 4.0))  # b is a: sees the update
        assert stats(cap) == (0, 2)
        x2, y2 = torch.ones(3), torch.ones(3)
        assert_close(cap(x2, y2), torch.full((3,), 3.0))
        assert stats(cap) == (1, 2)
        assert_close(x2, torch.full((3,), 2.0))  # the in-place update of the input


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = 2.0
        self.use_relu = True

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.use_relu:  # static control flow on a guarded scalar
            y = torch.relu(y)
        return y


def test_attribute_value_change_misses_after_fast_hits():
    m = Scaled()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        for _ in range(3):
            assert_close(cap(X), m(X))
        assert stats(cap) == (2, 1)
        m.scale = 3.0
        assert_close(cap(X), m(X))
        m.use_relu = False
        assert_close(cap(X), m(X))
        assert stats(cap) == (2, 3)
        m.scale, m.use_relu = 2.0, True
        assert_close(cap(X), m(X))
        assert stats(cap) == (3, 3)


def test_forward_hook_added_misses():
    m = Scaled()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        cap(X)
        cap(X)
        handle = m.lin.register_forward_hook(lambda mod, inp, out: out * 0)
        assert_close(cap(X), m(X))
        assert stats(cap) == (1, 2)
        handle.remove()
        assert_close(cap(X), m(X))


def test_parameter_replaced_misses():
    m = Scaled()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        cap(X)
        cap(X)
        m.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
        assert_close(cap(X), m(X))  # same metadata: a hit must still use the new weight
        m.lin.weight.data = torch.randn(4, 4, dtype=torch.float64)
        m.lin.bias.data = m.lin.bias.data.double()
        assert_close(cap(X.double()), m(X.double()))


GLOBAL_SCALE = 2.0


def f_global(x):
    return x * GLOBAL_SCALE


def test_global_change_misses():
    global GLOBAL_SCALE
    cap = calls(f_global, (X,), (X,))
    GLOBAL_SCALE = 5.0
    try:
        with torch.no_grad():
            assert_close(cap(X), X * 5.0)
    finally:
        GLOBAL_SCALE = 2.0
    assert stats(cap) == (1, 2)


def test_grad_mode_is_guarded():
    cap = capture(f_scale, backend="eager")
    with torch.no_grad():
        cap(X, 2.0)
    cap(X, 2.0)
    assert stats(cap) == (0, 2)


def test_closure_change_misses():
    k = 2.0

    def f(x):
        return x * k

    cap = capture(f, backend="eager")
    with torch.no_grad():
        assert_close(cap(X), X * 2)
        k = 3.0
        assert_close(cap(X), X * 3)
    assert stats(cap) == (0, 2)


def test_value_read_stops_capture_and_runs_eagerly():
    def f(x):
        if x.sum() > 0:  # branch on tensor data
            return x + 1
        return x - 1

    cap = capture(f, backend="eager")
    with torch.no_grad():
        pos, neg = torch.ones(2), -torch.ones(2)
        assert_close(cap(pos), pos + 1)
        assert_close(cap(neg), neg - 1)  # same guard, other branch: still correct
    st = capture_stats(cap)
    assert st["eager_runs"] == 2 and st["graphs"] == 0
    assert list(st["stop_reasons"]) == ["tensor value read: Tensor.__bool__"]


def test_impure_call_stops_capture():
    import random

    def f(x):
        return x * random.random()

    cap = capture(f, backend="eager")
    with torch.no_grad():
        a, b = cap(X), cap(X)
    assert not torch.equal(a, b)  # a fresh random number each call, as eagerly
    assert "impure call" in next(iter(capture_stats(cap)["stop_reasons"]))


def test_unknown_native_stops_capture():
    import zlib

    def f(x):
        return x * (zlib.crc32(b"abc") % 3)

    cap = capture(f, backend="eager")
    with torch.no_grad():
        assert_close(cap(X), f(X))
    assert "unannotated native call" in next(iter(capture_stats(cap)["stop_reasons"]))
