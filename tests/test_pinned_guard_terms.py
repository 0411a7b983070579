"""A guard's `ints[i] == constant` terms, checked by the kernel holder before it calls a
variant's library (csrc/artifact.h): which terms they are, and that variants under one
key still serve exactly their own calls."""
import sympy
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _C
from eagerc.artifact import pinned_terms
from eagerc.compile.guard_source import guard_source


def test_pinned_terms_are_the_guards_constant_comparisons():
    s3, s4 = sympy.Symbol("s3"), sympy.Symbol("s4")
    source = guard_source({"s3": ("i", 5), "s4": ("i", 7)},
                          [(2, sympy.Integer(64)), sympy.Eq(s3, 128), sympy.Ge(s4, 2), (9, s3 * 2),
                           (11, sympy.Integer(-1)), sympy.Eq(s4, s3)])
    # A slot compared with a constant, directly or through its bound symbol; not a range,
    # not a slot compared with an expression or with another symbol.
    assert pinned_terms(source) == [(2, 64), (5, 128), (11, -1)]


def test_a_guard_with_no_constant_terms_pins_nothing():
    s0 = sympy.Symbol("s0")
    assert pinned_terms(guard_source({"s0": ("i", 0)}, [sympy.Ge(s0, 2), (1, s0)])) == []
    assert pinned_terms("") == []


def test_variants_under_one_key_each_serve_their_own_calls(monkeypatch, fresh_cache):
    """1x1 convolutions of several weight shapes share a signature key (one kernel per
    weight shape): each call, in any order, is served by its own variant's pinned sizes,
    with one compile per shape and the results of CPU eager."""
    loaded = []
    load = _C._load_artifact

    def spy(variant_id, path, num_outputs, pinned=()):
        loaded.append(list(pinned))
        return load(variant_id, path, num_outputs, list(pinned))

    monkeypatch.setattr(_C, "_load_artifact", spy)
    x = torch.randn(1, 8, 4, 4)
    weights = {c: torch.randn(c, 8, 1, 1) for c in (16, 4, 32)}
    eagerc.reset_stats()
    for c in (16, 4, 16, 32, 4, 32, 16):
        got = F.conv2d(x.to("eagerc"), weights[c].to("eagerc")).cpu()
        torch.testing.assert_close(got, F.conv2d(x, weights[c]))
    stats = eagerc.stats()["ops"]["aten::convolution@PrivateUse1"]
    assert stats["kernels"] == 3 and stats["hits"] == 4
    assert len(loaded) == 3 and all(loaded)
    # The variants differ in a pinned term: the output channels.
    assert len({tuple(p) for p in loaded}) == 3
