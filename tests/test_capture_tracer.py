"""The instruction source of the monitor: sys.monitoring on 3.12+, settrace on 3.11; both
leave no trace behind and give the same records."""
import sys

import pytest
import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats
from eagerc.capture.tracer import MonitoringTracer, SetTraceTracer, make_tracer


class Acc:
    last = None


def program(x, acc):
    parts = []
    for i, row in enumerate(x.unbind(0)):
        try:
            if i == 1:
                raise KeyError(i)  # an exception caught inside the run: stack cut back
            parts.append(row * (i + 1))
        except KeyError:
            parts.append(row - 1)
    acc.last = len(parts)  # a side effect the mock replays
    gen = (p.sum() for p in parts)  # a generator: frames resumed several times
    return torch.stack(list(gen))


@pytest.mark.parametrize("forced", [None, "settrace"])
def test_same_records_with_either_tracer(monkeypatch, forced):
    if forced:
        monkeypatch.setenv("EAGERC_CAPTURE_TRACER", forced)
    acc, ref_acc = Acc(), Acc()
    cap = capture(program, backend="eager")
    with torch.no_grad():
        for n in (3, 3):
            x = torch.randn(n, 4)
            acc.last = ref_acc.last = None
            assert_close(cap(x, acc), program(x, ref_acc))
            assert acc.last == ref_acc.last == n
    s = capture_stats(cap)
    assert (s["records"], s["hits"], s["stop_reasons"]) == (1, 1, {})


def test_tracer_choice_and_cleanup():
    tracer = make_tracer(lambda *a: None, print)
    if hasattr(sys, "monitoring"):
        assert isinstance(tracer, MonitoringTracer)
        with tracer:
            assert sys.monitoring.get_tool(tracer.tool) == "eagerc.capture"
        assert sys.monitoring.get_tool(tracer.tool) is None
    else:
        assert isinstance(tracer, SetTraceTracer)


def test_a_users_settrace_is_put_back():
    def user_tracer(frame, event, arg):
        return None

    old = sys.gettrace()
    sys.settrace(user_tracer)
    try:
        cap = capture(lambda x: x + 1, backend="eager")
        cap(torch.ones(2))
        assert sys.gettrace() is user_tracer
    finally:
        sys.settrace(old)


def test_unknown_frame_layout_runs_eagerly_and_says_why(monkeypatch):
    """On a Python whose frame layout frames.py does not know, the monitor never reads a
    frame: every call runs eagerly, with the reason in capture_stats."""
    from eagerc.capture import captured, frames

    monkeypatch.setattr(frames, "stack_supported", lambda: False)
    x = torch.randn(3, 4)
    cap = capture(lambda t: (t * 2).relu(), backend="eager")
    for _ in range(2):
        assert_close(cap(x), (x * 2).relu())
    stats = capture_stats(cap)
    assert stats["stop_reasons"] == {captured.UNSUPPORTED_PYTHON: 2}
    assert (stats["records"], stats["graphs"], stats["eager_runs"]) == (0, 0, 2)


def test_this_pythons_frame_layout_is_known():
    from eagerc.capture import frames

    assert frames.stack_supported() is (sys.version_info[:2] in ((3, 11), (3, 12)))
