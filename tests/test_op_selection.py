"""Which ops eagerc serves: enable("cpu") with ops=None, ops named explicitly, disable.

ops=None registers every op eagerc can compile and leaves views, random ops and the
device runtime (allocation, copies) native; a random op named in ops= is compiled;
disable puts the native kernels back.
"""
from __future__ import annotations

import pytest
import torch

import eagerc


def op_stats(name):
    return eagerc.stats()["ops"].get(name, {"hits": 0, "misses": 0, "fallbacks": 0, "fallback_reasons": {}})


@pytest.fixture(scope="module")
def default_ops():
    """The ops enable("cpu") registers; disabled again before anything else runs."""
    try:
        ops = eagerc.enable("cpu")
    finally:
        eagerc.disable("cpu")
    return set(ops)


def test_default_registers_many_ops(default_ops):
    assert len(default_ops) > 300
    for op in ("aten::add.Tensor", "aten::mul.Tensor", "aten::mm", "aten::_softmax", "aten::sum.dim_IntList",
               "aten::where.self", "aten::cat", "aten::add_.Tensor", "aten::add.out", "aten::index_select",
               "aten::gather", "aten::clamp", "aten::exp", "aten::abs.out", "aten::amax"):
        assert op in default_ops, op


@pytest.mark.parametrize("op", ["aten::view", "aten::transpose.int", "aten::t", "aten::expand",
                                "aten::slice.Tensor", "aten::select.int", "aten::permute",
                                "aten::as_strided", "aten::unsqueeze", "aten::squeeze.dim"])
def test_default_excludes_views(default_ops, op):
    assert op not in default_ops


@pytest.mark.parametrize("op", ["aten::normal_", "aten::bernoulli_.float", "aten::uniform_",
                                "aten::randperm", "aten::multinomial", "aten::exponential_"])
def test_default_excludes_random_ops(default_ops, op):
    assert op not in default_ops


@pytest.mark.parametrize("op", ["aten::empty.memory_format", "aten::empty_strided", "aten::copy_",
                                "aten::_local_scalar_dense", "aten::resize_", "aten::set_.source_Storage"])
def test_default_excludes_runtime_ops(default_ops, op):
    assert op not in default_ops


def test_default_enable_leaves_eager_working():
    # Every call below (allocation, random init, views, reductions) goes through
    # the ops=None registration; results must still be right.
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    want = (x.t() * 2).sum(0)
    eagerc.reset_stats()
    with eagerc.enabled("cpu"):
        got = (x.t() * 2).sum(0)
        r = torch.empty(3, 4).uniform_()
    torch.testing.assert_close(got, want)
    assert 0.0 <= r.min().item() and r.max().item() < 1.0
    s = eagerc.stats()
    assert op_stats("aten::mul.Tensor@CPU")["hits"] + op_stats("aten::mul.Tensor@CPU")["misses"] > 0
    # random and view ops never reached eagerc
    assert "aten::uniform_@CPU" not in s["ops"]
    assert "aten::t@CPU" not in s["ops"]


def test_runtime_ops_cannot_be_named():
    with pytest.raises(ValueError, match="runtime"):
        eagerc.enable("cpu", ops=["aten::copy_"])
    assert not eagerc._C._is_enabled("CPU")


def test_unknown_op_is_refused():
    with pytest.raises(ValueError, match="no such operator"):
        eagerc.enable("cpu", ops=["aten::definitely_not_an_op"])
    eagerc.disable("cpu")


@pytest.mark.parametrize("op,call", [
    ("aten::uniform_", lambda: torch.empty(64, 8).uniform_(-2.0, 3.0)),
    ("aten::normal_", lambda: torch.empty(64, 8).normal_(1.0, 0.5)),
], ids=["uniform_", "normal_"])
def test_named_random_op_is_compiled(op, call):
    eagerc.reset_stats()
    with eagerc.enabled("cpu", ops=[op]):
        a, b = call(), call()
    s = op_stats(op + "@CPU")
    assert s["hits"] + s["misses"] == 2 and s["fallbacks"] == 0, s
    assert a.shape == (64, 8) and torch.isfinite(a).all()
    assert not torch.equal(a, b)  # fresh random numbers on every call
    if op == "aten::uniform_":
        assert a.min() >= -2.0 and a.max() < 3.0
        assert a.std() > 0.5
    else:
        assert abs(a.mean().item() - 1.0) < 0.2 and 0.3 < a.std().item() < 0.7


def test_named_rand_like_is_compiled():
    # rand_like is CompositeExplicitAutograd (no CPU kernel of its own): named in ops=
    # it must compile (Inductor's replace_random pass) rather than fall back.
    x = torch.empty(32, 4)
    eagerc.reset_stats()
    with eagerc.enabled("cpu", ops=["aten::rand_like"]):
        r = torch.rand_like(x)
    s = op_stats("aten::rand_like@CPU")
    assert s["hits"] + s["misses"] == 1 and s["fallbacks"] == 0, s
    assert r.shape == x.shape and r.min() >= 0 and r.max() < 1


def test_disable_restores_native_kernels():
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    eagerc.reset_stats()
    eagerc.enable("cpu", ops=["aten::add.Tensor", "aten::abs"])
    try:
        assert eagerc._C._is_enabled("CPU")
        first = x + y
        torch.abs(x)
    finally:
        eagerc.disable("cpu")
    assert not eagerc._C._is_enabled("CPU")
    s = op_stats("aten::add.Tensor@CPU")
    assert s["hits"] + s["misses"] == 1 and s["fallbacks"] == 0

    eagerc.reset_stats()
    again = x + y
    torch.abs(x)
    torch.testing.assert_close(again, first)
    assert eagerc.stats()["hits"] == 0 and eagerc.stats()["misses"] == 0
    assert eagerc.stats()["ops"] == {}


def test_enabled_context_restores_and_reenable_reuses_kernels():
    x = torch.randn(5, 5)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
    assert not eagerc._C._is_enabled("CPU")
    eagerc.reset_stats()
    torch.abs(x)
    assert op_stats("aten::abs@CPU")["hits"] == 0
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
    s = op_stats("aten::abs@CPU")
    # the kernel loaded before disable serves again: a hit, not another compile
    assert s["hits"] == 1 and s["misses"] == 0 and s["compiles"] == 0, s
