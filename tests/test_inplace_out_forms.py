"""In-place and out= forms compile: a written argument that is the very view of an input
(x.mul_(x), logical_not_'s out=self) runs a compiled elementwise kernel, and an out= that
eager resizes (torch.arange(n) passes an empty one) is resized by the holder as eager's
kernel would, then written by the kernel. Values, strides, warnings and errors are eager's;
the calls after the first are hits (no fallback), and a hit after the resize never enters
Python. Override mode on CPU, the eagerc device (host memory), and override mode on CUDA
where a GPU is present."""
from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

import eagerc
from eagerc import _C, _config
from eagerc.testing import assert_close

# The eagerc device registers itself where torch sees no GPU or with EAGERC_BACKING=cuda.
_DEVICE_HERE = torch._C._get_privateuse1_backend_name() == "eagerc"
MODES = ["override",
         pytest.param("device", marks=pytest.mark.skipif(
             not _DEVICE_HERE, reason="the eagerc device is not registered (a GPU is present: "
                                      "set EAGERC_BACKING=cuda to test it on GPU memory)")),
         pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"))]
DEVICE = {"override": "cpu", "device": "eagerc", "cuda": "cuda"}


def _enabled(mode):
    if mode == "override":
        return eagerc.enabled("cpu")
    if mode == "cuda":
        return eagerc.enabled("cuda")
    return eagerc.enabled("cpu", ops=[])  # the eagerc device serves itself; CPU stays native


def _outcome(fn, device):
    """(result on CPU or (exception type, message), warning messages) of fn(device)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = fn(device)
            # On a GPU (CUDA, or the eagerc device on GPU memory) floats may differ from
            # CPU eager's by rounding: compared with the tolerance table, not bitwise.
            on_gpu = got.is_cuda or (got.device.type == "eagerc" and _config.device_backing() == "cuda")
            got = ("ok", got.detach().cpu(), got.shape, got.stride(), got.dtype, on_gpu)
        except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
            got = (type(e).__name__, str(e).splitlines()[0])
    return got, [str(w.message) for w in caught if "eagerc" not in str(w.message)]


def _check_same(got, want):
    assert got[0] == want[0], (got, want)
    if want[0] != "ok":
        assert got[1] == want[1]
        return
    assert (got[2], got[3], got[4]) == (want[2], want[3], want[4])
    if got[5]:
        assert_close(got[1], want[1], equal_nan=True)
    else:
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0, equal_nan=True)


def _check_warnings(outcomes, want):
    """Each outcome is eager's; a hit warns exactly as eager does, and the miss at least
    as eager does (the compile it runs may warn too: Inductor's own deprecations)."""
    for k, got in enumerate(outcomes):
        _check_same(got[0], want[0])
        if k == 0:
            assert all(w in got[1] for w in want[1]), (got[1], want[1])
        else:
            assert got[1] == want[1]


def _served(fn, mode):
    """Runs fn on the mode's device three times (the miss, then two hits) and returns the
    outcomes and the stats' change over the last two runs."""
    outcomes = []
    with _enabled(mode):
        outcomes.append(_outcome(fn, DEVICE[mode]))
        before = eagerc.stats()
        outcomes += [_outcome(fn, DEVICE[mode]) for _ in range(2)]
        after = eagerc.stats()
    delta = {k: after[k] - before[k] for k in ("hits", "fallbacks", "aliased", "misses")}
    return outcomes, delta


def _arange(n=7):
    return torch.arange(n, dtype=torch.float32)


INPLACE = {
    "mul_": lambda d: torch.linspace(-2, 2, 12).view(3, 4).to(d).mul_(torch.linspace(1, 3, 12).view(3, 4).to(d)),
    "mul_ self": lambda d: (lambda x: x.mul_(x))(torch.linspace(-2, 2, 12).view(3, 4).to(d)),
    "mul_ broadcast": lambda d: torch.linspace(-2, 2, 12).view(3, 4).to(d).mul_(torch.tensor([1., 2, 3, 4]).to(d)),
    "mul_ same view of a slice": lambda d: (lambda b: b[:, ::2].mul_(b[:, ::2]) and b)(
        torch.linspace(-2, 2, 24).view(4, 6).to(d)),
    "logical_not_": lambda d: torch.tensor([[0., 1.5], [-2., 0.]]).to(d).logical_not_(),
    "logical_and_": lambda d: torch.tensor([0., 1.5, -2., 3.]).to(d).logical_and_(torch.tensor([1., 0., 2., 3.]).to(d)),
    "logical_and_ self": lambda d: (lambda x: x.logical_and_(x))(torch.tensor([0., 1.5, -2., 0.]).to(d)),
    "add_ int into float": lambda d: _arange(4).view(1, 4).repeat(3, 1).to(d).add_(torch.arange(4).to(d)),
    "add_ self alpha": lambda d: (lambda x: x.add_(x, alpha=2))(_arange(5).to(d)),
    "addcmul_ self": lambda d: (lambda x: x.addcmul_(x, _arange(5).to(d), value=0.5))(_arange(5).to(d) - 2),
    "sigmoid_": lambda d: torch.linspace(-3, 3, 10).to(d).sigmoid_(),
    "int64 add_ int": lambda d: torch.arange(6).to(d).add_(torch.arange(6).to(d), alpha=3),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_forms_are_compiled_kernels(name, mode, fresh_cache):
    fn = INPLACE[name]
    want = _outcome(fn, "cpu")
    outcomes, delta = _served(fn, mode)
    _check_warnings(outcomes, want)
    assert delta["fallbacks"] == 0 and delta["aliased"] == 0, delta
    assert delta["hits"] >= 2 and delta["misses"] == 0, delta


def _cumsum_into_int(d):
    x = torch.tensor([[0.5, 1.6, 2.2], [-0.5, -1.7, 3.1]]).to(d)
    return torch.cumsum(x, 1, out=torch.empty(0, dtype=torch.int64, device=d))


RESIZED = {
    "arange into an empty out": lambda d: torch.arange(0, 7, out=torch.empty(0, dtype=torch.int64, device=d)),
    "arange float step into an empty out": lambda d: torch.arange(0.5, 7, 0.5, out=torch.empty(0, device=d)),
    "arange into a non-empty out of another size": lambda d: torch.arange(2, 9, out=torch.empty(3, dtype=torch.int64, device=d)),
    "arange into an out of the right size": lambda d: torch.arange(1, 8, out=torch.empty(7, dtype=torch.int64, device=d)),
    "eye n m into an empty out": lambda d: torch.eye(3, 5, out=torch.empty(0, device=d)),
    "eye n into an out of another shape": lambda d: torch.eye(3, out=torch.empty(2, 2, device=d)),
    "linspace into an empty out": lambda d: torch.linspace(-1, 1, 9, out=torch.empty(0, device=d)),
    "logspace into an empty out": lambda d: torch.logspace(0, 2, 5, out=torch.empty(0, device=d)),
    # torch.arange/eye without out= pass an empty out to arange.start_out / eye.m_out.
    "position ids (GPT-2)": lambda d: torch.arange(3, 3 + 5, dtype=torch.long, device=d).unsqueeze(0),
    "eye": lambda d: torch.eye(4, device=d),
    # An out= op whose functional form is compiled but whose out has another dtype: the
    # out= op itself serves it, its out resized as eager's Meta kernel resizes it.
    "cumsum into an empty int64 out": _cumsum_into_int,
    "add into a non-empty out of another shape": lambda d: torch.add(
        _arange(6).view(2, 3).to(d), 1, out=torch.empty(4, device=d)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(RESIZED))
def test_resized_outs_are_written_by_the_kernel(name, mode, fresh_cache):
    fn = RESIZED[name]
    want = _outcome(fn, "cpu")
    outcomes, delta = _served(fn, mode)
    _check_warnings(outcomes, want)  # eager's resize warning, once per call, or none
    assert delta["fallbacks"] == 0 and delta["aliased"] == 0, delta
    assert delta["hits"] >= 2 and delta["misses"] == 0, delta


def _partial_overlap(d):
    x = _arange(8).to(d)
    return x[1:].add_(x[:-1])


ERRORS = {
    "float result into an int64 self": lambda d: torch.arange(4).to(d).mul_(1.5),
    "float result into an int64 self (tensor)": lambda d: torch.arange(4).to(d).mul_(torch.ones(4).to(d) * 1.5),
    "in-place broadcast that would change the shape": lambda d: torch.ones(3, 1).to(d).mul_(torch.ones(3, 4).to(d)),
    "partial overlap of self and other": _partial_overlap,
    "self overlapping itself": lambda d: torch.zeros(1).to(d).expand(3).mul_(2),
    "arange with step 0": lambda d: torch.arange(0, 5, 0, out=torch.empty(0, device=d)),
    "eye with a negative n": lambda d: torch.eye(-1, out=torch.empty(0, device=d)),
    "add into an empty int64 out with a float result": lambda d: torch.add(
        _arange(4).to(d), 1, out=torch.empty(0, dtype=torch.int64, device=d)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_calls_raise_eagers_errors(name, mode, fresh_cache):
    fn = ERRORS[name]
    want = _outcome(fn, "cpu")
    assert want[0][0] != "ok"
    outcomes, _ = _served(fn, mode)
    for got in outcomes:
        assert got[0][0] == want[0][0]
        # The message may name the device ("eagerc:0" for "cpu") where eager's names it.
        assert got[0][1].replace("eagerc:0", "cpu").replace("eagerc", "cpu") == want[0][1], got


@pytest.mark.parametrize("mode", MODES)
def test_same_view_of_a_non_elementwise_op_runs_eagers_kernel(mode, fresh_cache):
    """cumsum writing into its own input reads elements it already wrote: only an
    elementwise op may share one view between input and output in a compiled kernel."""
    def fn(d):
        x = torch.tensor([1., 2., 3., 4.]).to(d)
        return torch.cumsum(x, 0, out=x)

    want = _outcome(fn, "cpu")
    outcomes, delta = _served(fn, mode)
    for got in outcomes:
        _check_same(got[0], want[0])
    assert delta["fallbacks"] + delta["aliased"] == 2, delta


@pytest.mark.parametrize("call", ["arange", "eye"])
def test_hit_after_the_resize_never_enters_python(call, fresh_cache):
    if call == "arange":
        op, fn, key = torch.arange, (lambda f: f(0, 11, out=torch.empty(0, dtype=torch.int64))), \
            "aten::arange.start_out@CPU"
    else:
        op, fn, key = torch.eye, (lambda f: f(3, 4, out=torch.empty(0))), "aten::eye.m_out@CPU"
    with eagerc.enabled("cpu"):
        fn(op)  # miss: compiles for an out of the result's shape
        calls_before = _C._resolver_calls()
        hits_before = eagerc.stats()["ops"][key]["hits"]
        outs = [torch.empty(0, dtype=torch.int64) if call == "arange" else torch.empty(0) for _ in range(200)]
        python_calls = []

        def profiler(frame, event, arg):
            if event == "call":  # a Python function started (C calls are c_call)
                python_calls.append(frame.f_code.co_name)

        sys.setprofile(profiler)
        try:
            for out in outs:
                op(0, 11, out=out) if call == "arange" else op(3, 4, out=out)
        finally:
            sys.setprofile(None)
        assert python_calls == []
        assert _C._resolver_calls() == calls_before
        assert eagerc.stats()["ops"][key]["hits"] - hits_before == 200
    want = fn(op)
    for out in outs:
        assert out.shape == want.shape and out.stride() == want.stride()
        torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES[:2])
def test_opinfo_inplace_and_out_forms_match_eager_and_compile(mode, fresh_cache):
    """OpInfo samples (code nobody here wrote) of the issue's ops, through
    tools/inplace_out_sweep.py: no mismatch, and every overload they reach compiled."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
    import inplace_out_sweep

    total, bad, results = inplace_out_sweep.run(
        {"mul", "logical_not", "logical_and", "add", "arange", "eye", "linspace", "sigmoid"}, 1, [mode])
    assert total >= 20
    assert bad[mode] == 0
    fell_back = {key: dict(c) for key, c in results.items() if c["fallback"]}
    assert fell_back == {}
    assert len(results) >= 15
