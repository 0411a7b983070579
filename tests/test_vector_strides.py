"""Inductor's C++ stride questions answered without sympy's simplify
(eagerc/codegen/cpp/vector_strides.py): the same answers as Inductor's, and Inductor's own
path where the index is not a polynomial. Answers, not seconds: tools/bench_cold.py
--compile measures the time."""
from __future__ import annotations

import pytest
import sympy
import torch

import eagerc
from eagerc.codegen.cpp import vector_strides
from eagerc.testing import assert_close


def _symbols(*names, **assumptions):
    return [sympy.Symbol(n, integer=True, **assumptions) for n in names]


def test_a_polynomial_index_gets_inductors_stride():
    from torch._inductor.sizevars import stride_at_vec_range

    x0, x1 = _symbols("x0", "x1", nonnegative=True)
    s0, s1 = _symbols("s0", "s1", positive=True)
    for index, var in ((s0 * x0 + x1, x0), (s0 * x0 + x1, x1), (64 * x0 + x1, x0),
                       (3 * s0 * s1 * x0 + 7, x0), (s0 + s1, x0)):
        fast = vector_strides.fast_stride(index, var)
        assert fast is not None and sympy.srepr(fast) == sympy.srepr(stride_at_vec_range(index, var, 16))


def test_other_indexes_are_left_to_inductor():
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    x0, x1 = _symbols("x0", "x1", nonnegative=True)
    (s0,) = _symbols("s0", positive=True)
    assert vector_strides.fast_stride(FloorDiv(x0, 16) + x1, x0) is None
    assert vector_strides.fast_stride(ModularIndexing(x0, 1, s0) + x1, x0) is None
    assert vector_strides.fast_stride(x0 ** 2 + x1, x0) is None      # 2*x0 + 1: not a monomial
    assert vector_strides.fast_stride(x0 * (s0 + 1) + x1, x0) is None  # s0 + 1: not a monomial


def test_every_stride_a_compile_asks_is_inductors(fresh_cache, tmp_path, monkeypatch):
    from torch._inductor import codecache
    from torch._inductor.sizevars import stride_at_vec_range

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(codecache.CppWrapperCodeCache, "cache", {})
    asked = []
    fast_stride = vector_strides.fast_stride

    def recording(index, var):
        answer = fast_stride(index, var)
        asked.append((index, var, answer))
        return answer

    monkeypatch.setattr(vector_strides, "fast_stride", recording)
    x, m = torch.randn(4, 8, 32), torch.randn(32, 33)
    calls = [lambda t: t.sum(1), lambda t: t.sum(0), lambda t: torch.softmax(t, 1),
             lambda t: torch.nn.functional.layer_norm(t, (32,)), lambda t: t.permute(2, 0, 1).contiguous(),
             lambda t: t[:, ::2].sum(-1)]
    expected = [call(x) for call in calls] + [m.t().contiguous()]
    with eagerc.enabled("cpu"):
        got = [call(x) for call in calls] + [m.t().contiguous()]
    for a, b in zip(got, expected):
        assert_close(a, b)
    answered = [(index, var, answer) for index, var, answer in asked if answer is not None]
    assert answered, "no stride question reached the fast path"
    for index, var, answer in answered:
        assert sympy.srepr(answer) == sympy.srepr(stride_at_vec_range(index, var, 16)), (index, var)
    # Restored after the compile.
    from torch._inductor.codegen import cpp

    assert cpp.stride_at_vec_range is stride_at_vec_range
