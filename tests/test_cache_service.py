"""The compile/cache service (eagerc/cache.py) and the typed seam with C++ (eagerc._C)."""
from __future__ import annotations

import logging

import pytest
import torch

import eagerc
from eagerc import _C, targets
from eagerc.cache import CacheKey
from eagerc.compile import op as op_compiler
from eagerc import refusals as errors
from eagerc.refusals import CompileError
from eagerc.testing import assert_close

ABS = "aten::abs@CPU"
CPU = targets.for_device("cpu")


def key(**changes):
    fields = {"kind": "op", "target": CPU, "name": "aten::abs", "signature": b"sig"} | changes
    return CacheKey(**fields)


def test_same_key():
    assert key().entry_key() == key().entry_key()
    assert key().namespace().digest() == key().namespace().digest()


def test_different_key_per_component(monkeypatch):
    assert key(kind="graph").entry_key() != key().entry_key()
    assert key(target=targets.for_device("eagerc")).entry_key() != key().entry_key()
    assert key(signature=b"other").entry_key() != key().entry_key()
    base = key().namespace().digest()
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")  # an Inductor setting that changes code
    assert key().namespace().digest() != base
    monkeypatch.delenv("TORCHINDUCTOR_MAX_AUTOTUNE")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/elsewhere")  # one that does not
    assert key().namespace().digest() == base
    monkeypatch.setenv("CXX", "clang++-that-is-not-installed")
    assert key().namespace().digest() != base


def test_changed_inductor_config_changes_the_namespace():
    import torch._inductor.config as inductor_config

    base = key().namespace().digest()
    with inductor_config.patch({"cpp.simdlen": 8}):
        assert key().namespace().digest() != base
    assert key().namespace().digest() == base


def test_typed_answers():
    assert _C.MissAnswer.fallback("no lowering").action == "fallback"
    assert _C.MissAnswer.fallback("busy", remember=False).remember is False
    assert _C.MissAnswer.run_on_host_aliases().action == "run_on_host_aliases"
    # An answer for the call keyed by its scalar values: the same action, marked.
    keyed = _C.MissAnswer.interim().with_scalar_values()
    assert (keyed.action, keyed.specialized, _C.MissAnswer.interim().specialized) == (
        "interim", True, False)
    with pytest.raises(TypeError):
        _C.MissAnswer.kernel("a path is not an artifact")


def test_layout_is_owned_by_cpp():
    a, b = _C._tensor_inputs_layout([2, 0])
    assert (a.kind, a.size_slots, a.stride_slots, a.offset_slot) == ("tensor", [0, 1], [2, 3], 4)
    assert (b.size_slots, b.offset_slot, b.int_slots) == ([], 5, 1)


def test_resolver_receives_the_call_layout(fresh_cache, monkeypatch):
    from eagerc.per_op import resolver

    seen = []
    real = resolver.resolve

    def spy(request):
        seen.append([(s.kind, s.arg, s.item) for s in request.layout])
        return real(request)

    monkeypatch.setattr(resolver, "resolve", spy)
    with eagerc.enabled("cpu", ops=["aten::add.Tensor", "aten::cat"]):
        torch.add(torch.randn(3), torch.randn(3), alpha=2.5)
        torch.cat([torch.randn(2), torch.randn(3)])
        torch.arange(4) + 7  # a Python number: a wrapped 0-dim tensor, lifted as an int
    assert seen == [[("tensor", 0, None), ("tensor", 1, None), ("float", 2, None)],
                    [("tensor", 0, 0), ("tensor", 0, 1)],
                    [("tensor", 0, None), ("int", 1, None)]]


def _refuse(remembered):
    def compile_op(*a, **k):
        raise CompileError("refused for the test", remembered)
    return compile_op


def test_permanent_failure_is_remembered_in_l1_and_on_disk(fresh_cache, monkeypatch):
    monkeypatch.setattr(op_compiler, "compile_op", _refuse(errors.ON_DISK))
    x = torch.randn(5, 5)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
        calls = _C._resolver_calls()
        for _ in range(3):
            torch.abs(x)
        assert _C._resolver_calls() == calls  # L1 remembers the decision
    assert eagerc.stats()["ops"][ABS]["fallback_reasons"] == {"refused for the test": 4}
    _C._clear_tables()
    monkeypatch.setattr(op_compiler, "compile_op", _refuse(errors.NOWHERE))
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
    assert eagerc.stats()["compiles"] == 0  # read back from disk, not compiled


@pytest.mark.parametrize("remembered, asks_again", [(errors.NOWHERE, 1), (errors.IN_PROCESS, 0)])
def test_failure_not_of_the_signature_stays_off_disk(fresh_cache, monkeypatch, remembered,
                                                     asks_again):
    """NOWHERE: asked again on the next call; IN_PROCESS: remembered in L1 only. Neither
    is on disk: a new process compiles."""
    monkeypatch.setattr(op_compiler, "compile_op", _refuse(remembered))
    x = torch.randn(5, 5)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(x)
        calls = _C._resolver_calls()
        torch.abs(x)
        assert _C._resolver_calls() == calls + asks_again
    monkeypatch.undo()
    _C._clear_tables()  # a new process
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        y = torch.abs(x)
    assert torch.equal(y, x.abs())
    assert eagerc.stats()["compiles"] == 1


def test_no_compile_inside_no_dispatch(fresh_cache):
    from torch.utils._mode_utils import no_dispatch

    x = torch.randn(6, 6)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        with no_dispatch():
            y = torch.abs(x)
        assert eagerc.stats()["compiles"] == 0
        assert "no_dispatch" in next(iter(eagerc.stats()["ops"][ABS]["fallback_reasons"]))
        z = torch.abs(x)
    assert torch.equal(y, x.abs()) and torch.equal(z, x.abs())
    assert eagerc.stats()["compiles"] == 1  # the plain call compiled: nothing was remembered


def test_environment_failures_are_told_from_graph_failures():
    class CppCompileError(RuntimeError):  # Inductor's name for a C++ compiler failure
        pass

    def chained(outer, inner):
        try:
            raise inner
        except Exception as e:  # noqa: BLE001
            try:
                raise outer from e
            except Exception as chained_error:  # noqa: BLE001
                return chained_error

    assert errors.environment_failure(OSError(28, "No space left on device"))
    assert errors.environment_failure(chained(RuntimeError("wrapped"), CppCompileError("killed")))
    assert errors.environment_failure(chained(RuntimeError("wrapped"), MemoryError()))
    assert not errors.environment_failure(chained(RuntimeError("lowering"), KeyError("op")))
    # The compiler ran and rejected the generated source: the graph's failure, remembered.
    diagnostic = CppCompileError("C++ compile error\n\nOutput:\n/tmp/x/ab.main.cpp:18:55: error: "
                                 "too many arguments to function 'aoti_torch_cpu_resize_'")
    assert not errors.environment_failure(chained(RuntimeError("wrapped"), diagnostic))


def test_a_named_composite_op_reaches_its_decomposition_inside_its_own_compile(fresh_cache):
    # softmax.int is CompositeImplicitAutograd: named, it gets a holder, and eager's
    # reference run inside its miss calls it again. That call must decompose natively
    # (csrc/op_state.cpp), not wait on its own compile (it hung a GPU test for 400 s).
    x = torch.randn(3, 7)
    with eagerc.enabled("cpu", ops=["aten::softmax.int", "aten::_softmax"]):
        got = [torch.softmax(x, dim=1) for _ in range(2)]
    for y in got:
        assert_close(y, torch.softmax(x, dim=1))
    s = eagerc.stats()["ops"]["aten::softmax.int@CPU"]
    assert (s["compiles"], s["hits"], s["fallbacks"]) == (1, 1, 0), s


def test_asking_again_for_a_key_being_compiled_is_refused_not_awaited(fresh_cache, monkeypatch):
    # The compile service's per-key lock is not re-entrant: a compile that reaches the
    # same key again on its thread gets a refusal it does not remember (NOWHERE).
    from eagerc.cache import service

    seen = {}
    real_compile, real_locked = op_compiler.compile_op, service().locked

    def locked(key):
        seen.setdefault("key", key)
        return real_locked(key)

    def compile_op(*args, **kwargs):
        with pytest.raises(CompileError) as refused:
            with real_locked(seen["key"]):
                pass
        seen["refusal"] = refused.value
        return real_compile(*args, **kwargs)

    monkeypatch.setattr(service(), "locked", locked)
    monkeypatch.setattr(op_compiler, "compile_op", compile_op)
    x = torch.randn(4, 4)
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        y = torch.abs(x)
    assert torch.equal(y, x.abs())
    refusal = seen["refusal"]
    assert refusal.remembered == errors.NOWHERE
    assert "called again while it compiles" in str(refusal)
    assert eagerc.stats()["ops"][ABS]["compiles"] == 1


_LAYER_NORM_CHILD = """
import sys, torch, eagerc
x = torch.randn(4, 8)
with eagerc.enabled("cpu", ops=["aten::native_layer_norm"]):
    y = torch.nn.functional.layer_norm(x, (8,), torch.ones(8), torch.zeros(8))
native = torch.nn.functional.layer_norm(x, (8,), torch.ones(8), torch.zeros(8))
torch.testing.assert_close(y, native)
stats = eagerc.stats()["ops"]["aten::native_layer_norm@CPU"]
print(stats["compiles"], stats["disk_loads"], "eagerc.compile.op" in sys.modules)
"""


@pytest.mark.slow  # a compile, then a second process: 76 s on a busy 2-core machine
def test_scalar_values_asked_for_by_a_failed_lifted_trace_are_remembered_on_disk(fresh_cache):
    """native_layer_norm's `float eps` takes no symbolic float: the lifted trace fails and
    the op compiles with eps in its key. That answer is the signature's, so a new process
    asks for values at once: it loads the kernel without tracing (the compiler is never
    imported) instead of failing the same trace again."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))

    def child():
        done = subprocess.run([sys.executable, "-c", _LAYER_NORM_CHILD], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.split()

    assert child() == ["1", "0", "True"]
    assert child() == ["0", "1", "False"]


def test_a_kernel_that_runs_on_aliases_is_logged_as_such_not_as_a_failure(fresh_cache, caplog):
    """A convolution on a device whose memory is CUDA memory compiles to a call of CUDA's
    ATen function, which runs on CUDA aliases: the log says so, not "not compiled"."""
    from eagerc import cache

    with caplog.at_level(logging.INFO, logger="eagerc"):
        cache.service().refuse(key(name="aten::convolution"), errors.NeedsHostAliases("aten::convolution"))
        cache.service().refuse(key(name="aten::abs"), CompileError("refused for the test", errors.NOWHERE))
    lines = [r.getMessage() for r in caplog.records]
    assert any("aten::convolution runs on aliases of its memory home's tensors" in line for line in lines), lines
    assert not any("aten::convolution not compiled" in line for line in lines), lines
    assert any("aten::abs not compiled: refused for the test" in line for line in lines), lines
