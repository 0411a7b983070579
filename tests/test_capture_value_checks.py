"""Tensor values read by Python under capture (eagerc/capture/speculate.py): the value a
record read is checked after its graph; another value is a value miss that records once
more, values that keep changing stop capture, and a miss undoes what the graph wrote."""
import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats


def test_value_read_is_checked_after_the_graph():
    def f(x):
        if x.sum() > 0:  # branch on tensor data: one record per outcome, each checked
            return x + 1
        return x - 1

    cap = capture(f, backend="eager")
    with torch.no_grad():
        pos, neg = torch.ones(2), -torch.ones(2)
        for x in (pos, neg, pos, neg, pos):
            assert_close(cap(x), f(x))
    st = capture_stats(cap)
    assert (st["records"], st["graphs"], st["eager_runs"]) == (2, 2, 0)
    assert st["value_misses"] == 1 and st["stop_reasons"] == {}


def test_values_that_keep_changing_stop_capture():
    def f(x):
        m = x.max().item()
        return x / (m + 1)

    cap = capture(f, backend="eager")
    with torch.no_grad():
        for i in range(6):
            x = torch.randn(4) + i
            assert_close(cap(x), f(x))
    st = capture_stats(cap)
    assert st["value_misses"] == 3  # then the next monitor run stops at the read
    assert st["stop_reasons"] == {"tensor value read: Tensor.item": 1}
    assert st["eager_runs"] >= 2


def test_value_read_before_a_write_into_an_input_undone_on_a_miss():
    def f(x, buf):
        n = x.sum().item()
        buf.add_(x)  # the graph writes before the check: a miss undoes it from a copy
        return x * n

    cap = capture(f, backend="eager")
    b1, b2 = torch.zeros(3), torch.zeros(3)
    with torch.no_grad():
        for v in (1.0, 1.0, 1.0, 2.0, 1.0):
            x = torch.full((3,), v)
            assert_close(cap(x, b1), f(x, b2))
            assert_close(b1, b2)
    st = capture_stats(cap)
    assert st["stop_reasons"] == {} and st["value_misses"] == 1, st


def test_value_checked_is_the_one_read_before_a_later_write():
    def f(x):
        t = x.sum() * 1
        big = t.item() > 1  # read, then t is overwritten: the check must see the read
        t.zero_()
        return x * 2 if big else x - 1

    cap = capture(f, backend="eager")
    lo, hi = torch.zeros(3), torch.full((3,), 5.0)
    with torch.no_grad():
        for x in (lo, lo, hi, hi, lo):
            assert_close(cap(x), f(x))
    assert capture_stats(cap)["value_misses"] == 1


def test_value_read_in_eval_mode_with_dropout_is_checked():
    drop = torch.nn.Dropout(0.5).eval()  # F.dropout(training=False): nothing random

    def f(x):
        h = drop(x * 2)
        n = int((h > 0).sum().item())
        return h[:n] + 1

    cap = capture(f, backend="eager")
    with torch.no_grad():
        for x in (torch.ones(4), torch.ones(4), -torch.ones(4)):
            assert_close(cap(x), f(x))
    st = capture_stats(cap)
    assert st["stop_reasons"] == {} and st["value_misses"] == 1 and st["graphs"] == 2


def test_a_graph_that_fails_on_other_values_is_a_value_miss():
    def f(x):
        k = int((x > 0).sum().item())
        buf = torch.zeros(6)
        buf[:k] = x[x > 0]  # the recorded k no longer fits the new values' count
        return buf

    cap = capture(f, backend="eager")
    two, three = torch.tensor([1., -1, 2, -1]), torch.tensor([1., 1, 2, -1])
    with torch.no_grad():
        for x in (two, two, three, three, two):
            assert_close(cap(x), f(x))
    st = capture_stats(cap)
    assert st["value_misses"] == 1 and st["stop_reasons"] == {} and st["records"] == 2
