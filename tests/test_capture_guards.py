"""Guard behaviour: what makes a captured call miss (monitor again) and what lets it hit."""
import sys

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


def test_impure_call_stops_capture():
    import time  # (host random draws are captured: test_capture_long_tail.py)

    def f(x):
        # float64: two calls' times differ by microseconds, which float32 can round away
        return x.double() * time.perf_counter()

    cap = capture(f, backend="eager")
    with torch.no_grad():
        a, b = cap(X), cap(X)
    assert not torch.equal(a, b)  # a fresh time each call, as eagerly
    assert "impure call" in next(iter(capture_stats(cap)["stop_reasons"]))


def test_unknown_native_stops_capture():
    import zlib

    def f(x):
        return x * (zlib.crc32(b"abc") % 3)

    cap = capture(f, backend="eager")
    with torch.no_grad():
        assert_close(cap(X), f(X))
    assert "unannotated native call" in next(iter(capture_stats(cap)["stop_reasons"]))


def test_keyword_arguments_and_decorator():
    @capture(backend="eager")
    def f(x, *, scale=1.0):
        return x * scale

    with torch.no_grad():
        assert_close(f(X, scale=3.0), X * 3)
        assert_close(f(X, scale=3.0), X * 3)
        assert_close(f(X), X)  # no keyword: another record
    assert stats(f) == (1, 2)


def test_exception_in_captured_function_propagates_and_makes_an_eager_record():
    def f(x):
        raise ValueError("boom")

    cap = capture(f, backend="eager")
    for _ in range(3):
        with pytest.raises(ValueError, match="boom"):
            cap(X)
        assert sys.gettrace() is None  # the monitor is off again
    st = capture_stats(cap)
    # one monitor run; the identical calls after it hit its eager record
    assert (st["records"], st["misses"], st["hits"], st["graphs"]) == (1, 1, 2, 0)
    assert st["stop_reasons"] == {"program raised: ValueError": 1}


def test_guard_failures_name_the_failing_check():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mode = "a"

        def forward(self, x):
            return x + 1 if self.mode == "a" else x - 1

    net = Net()
    cap = capture(net, backend="eager")
    with torch.no_grad():
        cap(X)
        net.mode = "b"
        assert_close(cap(X), X - 1)
        assert_close(cap(X.new_zeros(3, 3)), X.new_zeros(3, 3) - 1)
    st = capture_stats(cap)
    assert st["misses"] == 3
    failures = st["guard_failures"]
    assert sorted(failures.values()) == [1, 1], failures
    (mode,) = [k for k in failures if ".mode != 'a'" in k]
    (size,) = [k for k in failures if k.startswith("tensor 'args[0]' size mismatch")]


def test_state_switched_by_the_first_call_records_once_more_then_hits():
    # transformers' BigBird: the first call switches `attention_type` to "original_full"
    # and replaces each attention module by a new one sharing its Linear layers; the
    # second call takes another path through Python (no switch), so it needs a run of its
    # own; then every call hits.
    import copy

    class Sparse(torch.nn.Module):
        def __init__(self, lin):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            return self.lin(x) * 2

    class Full(Sparse):
        def forward(self, x):
            return self.lin(x)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = "sparse"
            self.attn = Sparse(torch.nn.Linear(4, 4))

        def forward(self, x):
            if self.kind == "sparse" and x.shape[-1] <= 4:
                self.kind = "full"
                self.attn = Full(self.attn.lin)
            return self.attn(x)

    net = Net()
    ref = copy.deepcopy(net)
    cap = capture(net, backend="eager")
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(4):
            assert_close(cap(x), ref(x))
    st = capture_stats(cap)
    assert (st["records"], st["misses"], st["hits"]) == (2, 2, 2)
    assert net.kind == "full" and type(net.attn) is Full
    assert [".kind != 'sparse'" in k for k in st["guard_failures"]] == [True]


def test_nested_capture_runs_inside_the_outer_record():
    inner = capture(lambda x: x + 1, backend="eager")
    outer = capture(lambda x: inner(x) * 2, backend="eager")
    with torch.no_grad():
        assert_close(outer(X), (X + 1) * 2)
        assert_close(outer(X), (X + 1) * 2)
    assert stats(outer) == (1, 1)
    assert capture_stats(inner)["records"] == 0


def test_getattr_default_guards_absence():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "scale", 1.0)

    cap = capture(f, backend="eager")
    with torch.no_grad():
        assert_close(cap(X), X)
        cfg.scale = 5.0  # the attribute appears: the guard must notice
        assert_close(cap(X), X * 5)
    assert stats(cap) == (0, 2)


def test_float_arguments_lifted_after_threshold():
    cap = capture(f_scale, backend="eager")
    with torch.no_grad():
        for s in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.5):
            assert_close(cap(X, s), f_scale(X, s))
    st = capture_stats(cap)
    # three specialized records, then one record with the float as a graph input
    assert (st["records"], st["misses"], st["hits"]) == (4, 4, 3)


def test_lifting_abandoned_when_python_uses_the_float():
    def f(x, s):
        if s > 2.5:  # static control flow on the scalar: it must stay a guarded constant
            return x * s
        return x - s

    cap = capture(f, backend="eager")
    with torch.no_grad():
        for s in (1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 5.0):
            assert_close(cap(X, s), f(X, s))
    st = capture_stats(cap)
    assert st["stop_reasons"] == {"lifted scalar used outside torch ops": 1}
    assert (st["records"], st["hits"]) == (4, 2)  # 4.0 tried lifting; later values specialize


def test_dynamic_true_lifts_floats_at_once():
    cap = capture(f_scale, backend="eager", dynamic=True)
    with torch.no_grad():
        for s in (1.0, 2.0, 3.0):
            assert_close(cap(X, s), f_scale(X, s))
    assert stats(cap) == (2, 1)
    with torch.no_grad():
        y = torch.randn(5, 4)
        assert_close(cap(y, 2.0), f_scale(y, 2.0))  # a new shape: symbolic sizes, a hit
    assert capture_stats(cap)["records"] == 1


@pytest.mark.slow
def test_import_is_cheap():
    code = ("import sys, eagerc; before = set(sys.modules); import eagerc.capture; "
            "new = set(sys.modules) - before; "
            "bad = sorted(m for m in new if m.startswith(('torch._inductor', 'transformers', "
            "'torch._dynamo', 'eagerc.capture.monitor'))); print(bad); assert not bad")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
