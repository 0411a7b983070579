"""Every argument kind the signature handles, each through a real op: the compiled
kernel runs (no fallback) and matches native eager."""
from __future__ import annotations

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

x = torch.randn(6, 5)
idx = torch.tensor([0, 2, 5])

CASES = [
    # (id, overload served, call)
    ("Tensor?[] index", "aten::index.Tensor", lambda: x[idx]),
    ("Tensor?[] with None", "aten::index.Tensor", lambda: x[:, torch.tensor([1, 3])]),
    ("Tensor?[] index_put_", "aten::index_put_", lambda: x.clone().index_put_((idx,), torch.ones(3, 5))),
    ("Scalar? clamp None", "aten::clamp", lambda: torch.clamp(x, None, 0.5)),
    ("ScalarType? dtype", "aten::sum.dim_IntList", lambda: torch.sum(x, dim=[0], dtype=torch.float64)),
    ("bool keepdim", "aten::amax", lambda: torch.amax(x, dim=1, keepdim=True)),
    ("str rounding_mode", "aten::div.Tensor_mode", lambda: torch.div(x, 0.7 + x.abs(), rounding_mode="floor")),
    ("SymInt[] pad + Scalar value", "aten::constant_pad_nd", lambda: torch.nn.functional.pad(x, (1, 2), value=3.5)),
    ("float eps", "aten::native_layer_norm", lambda: torch.nn.functional.layer_norm(x, (5,), eps=1e-3)),
    ("int dim + Tensor[]", "aten::cat", lambda: torch.cat([x, x * 2], dim=1)),
    ("Scalar int on int tensor", "aten::add.Tensor", lambda: torch.arange(6) + 3),
    ("Scalar float promotes int tensor", "aten::mul.Tensor", lambda: torch.arange(6) * 2.5),
]


@pytest.mark.parametrize("overload,call", [(o, c) for _, o, c in CASES], ids=[i for i, _, _ in CASES])
def test_argument_kind_compiles_and_matches(overload, call):
    expected = call()
    eagerc.reset_stats()
    with eagerc.enabled("cpu", ops=[overload]):
        actual = call()
    assert_close(actual, expected)
    s = eagerc.stats()["ops"].get(f"{overload}@CPU")
    assert s is not None and s["misses"] + s["hits"] > 0, "the compiled kernel did not run"
    assert s["fallbacks"] == 0, s["fallback_reasons"]
