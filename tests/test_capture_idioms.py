"""Idioms of real model code under capture (issue: seen on files from public repositories):
each is one record with one graph, results and the state left equal to eager's, and the
second identical call a hit."""
import builtins
import importlib
import warnings

import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close

X = torch.randn(2, 4)


def _run(fn, *args, calls=3):
    """`calls` identical calls under no_grad; returns (last result, stats)."""
    captured = capture(fn, backend="eager")
    with torch.no_grad():
        for _ in range(calls):
            out = captured(*args)
            assert_close(out, fn(*args))
    return out, capture_stats(captured)


def _whole(stats, calls=3):
    assert stats["records"] == 1 and stats["graphs"] == 1, stats
    assert stats["hits"] == calls - 1 and stats["eager_runs"] == 0, stats
    assert stats["stop_reasons"] == {}, stats


def _imports(x):
    import math
    from os import path  # noqa: F401
    m = __import__("math")
    importlib.import_module("json")
    return x * math.pi + m.e


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "import-hook"])
def test_function_level_imports(hooked, monkeypatch):
    """Imports in forward, also with `builtins.__import__` replaced by a Python function
    (import hooks, lazy-import helpers)."""
    if hooked:
        original = builtins.__import__

        def hook(name, *args, **kwargs):
            return original(name, *args, **kwargs)
        monkeypatch.setattr(builtins, "__import__", hook)
    _, stats = _run(_imports, X)
    _whole(stats)


def test_legacy_constructors():
    def f(x):
        scale = torch.FloatTensor([1.0, 2.0, 3.0, 4.0])
        index = torch.LongTensor([3, 2, 1, 0])
        return (x * scale)[:, index] + torch.DoubleTensor([[0.5]]).float()
    out, stats = _run(f, X)
    _whole(stats)
    assert_close(out, (X * torch.tensor([1.0, 2, 3, 4]))[:, [3, 2, 1, 0]] + 0.5)


def test_legacy_constructor_of_sizes_is_uninitialized_but_captured():
    def f(x):
        buf = torch.FloatTensor(2, 4)
        return buf.fill_(1.0) + x
    _, stats = _run(f, X)
    _whole(stats)


def test_tensor_attribute_writes_are_replayed():
    outside = torch.randn(4)

    def f(x):
        y = x * 2
        y.some_attr = "tagged"
        y.requires_grad = False  # already False under no_grad: nothing changes
        outside.seen = 5
        return y, y + outside
    captured = capture(f, backend="eager")
    with torch.no_grad():
        captured(X)
        del outside.seen
        out, _ = captured(X)
    assert out.some_attr == "tagged" and outside.seen == 5
    _whole(capture_stats(captured), calls=2)


def test_warnings_filters_in_forward_are_replayed():
    def f(x):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore")
            warnings.warn("hidden")
            return x + 1
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters = warnings.filters
        n = len(filters)
        _, stats = _run(f, X)
        assert warnings.filters is filters and len(filters) == n  # restored as in eager
    assert shown == []
    _whole(stats)


def test_filterwarnings_in_forward_leaves_eagers_filters():
    def f(x):
        warnings.filterwarnings("ignore", message="eagerc idioms test")
        return x + 1
    before = len(warnings.filters)
    try:
        captured = capture(f, backend="eager")
        with torch.no_grad():
            for _ in range(3):
                captured(X)
        added = [w for w in warnings.filters
                 if getattr(w[1], "pattern", None) == "eagerc idioms test"]
        assert len(added) == 1 and len(warnings.filters) == before + 1
        stats = capture_stats(captured)
        assert stats["eager_runs"] == 0 and stats["stop_reasons"] == {}, stats
        # a second record is allowed (the list grew by the first call), never without a reason
        assert stats["records"] == 1 or sum(stats["guard_failures"].values()) == \
            stats["records"] - 1, stats
    finally:
        warnings.filters[:] = [w for w in warnings.filters
                               if getattr(w[1], "pattern", None) != "eagerc idioms test"]
        warnings._filters_mutated()


class _DynamicAttrs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def __getattr__(self, name):
        if name == "alias":
            return super().__getattr__("lin")
        return super().__getattr__(name)

    def forward(self, x):
        return self.__getattr__("lin")(x) + self.alias(x)


def test_module_getattr_calls_in_forward():
    _, stats = _run(_DynamicAttrs(), X)
    _whole(stats)


def test_regular_expressions_in_forward():
    """re's compile cache is not guarded (a new pattern elsewhere would make identical calls
    miss); patterns and matches are pure."""
    import re

    def f(x, name):
        m = re.match(r"layer\.(\d+)", name)
        return x * int(m.group(1)) if m else x - 1
    captured = capture(f, backend="eager")
    with torch.no_grad():
        for name in ["layer.3", "layer.3", "head", "head", "layer.3"]:
            assert_close(captured(X, name), f(X, name))
            re.compile(f"unrelated{name}")  # the cache changes between calls
    stats = capture_stats(captured)
    assert stats["records"] == 2 and stats["hits"] == 3 and stats["eager_runs"] == 0, stats
