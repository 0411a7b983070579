"""The op miss path is one pass (docs/architecture.md, "The miss path, room by room").

C++ calls the resolver once per miss and gets one explicit answer (no rounds: a call whose
lifted scalars do not trace, or whose stored variant's guard refuses it, is answered in the
same call); the miss is one value (eagerc/per_op/miss.py) that the steps read instead of
threads of parameters; each refusal carries its own record and answer; an exception's
chain is walked in one place.

The call path of one miss is recorded with sys.setprofile while a fresh signature misses
(empty kernel cache, empty L1) and compiles. What counts:

- the hall is eagerc/per_op/resolver.py: it drives every step;
- a room is a module the hall calls into: the target (eagerc/targets.py), background
  compiles (eagerc/per_op/background.py: whether the miss waits for its compile), the
  compile/cache service (eagerc/cache.py), eager's check (eagerc/per_op/eager_rules.py)
  and the compiler (eagerc/compile/*, eagerc/codegen/*). Whatever a room calls while the
  hall waits for it (the compiler asking the target for stand-ins, the service asking
  kernel_cache and compile/settings for the namespace) is that room's own work, inside the
  same visit;
- small helpers any step may use are not rooms: eagerc/aten_meta.py (the op by name),
  eagerc/_stats.py (counters), eagerc/_config.py, eagerc/refusals.py, eagerc/artifact.py,
  eagerc/random_streams.py (the caller's random streams kept across the check and the
  compile), eagerc/per_op/miss.py (the miss as a value: its eager verdict runs eager's check
  when the hall asks), eagerc/kernel_key.py (the miss's key: a value built with the miss)
  and eagerc/per_op/registration.py (the bridge's entrance that hands the miss to the hall).

The test asserts that nothing calls back into the hall from inside a room (no closures or
callbacks: the service is passive), that no other eagerc module is visited, and that the
rooms come in the order of the steps, each once, except the service, visited twice: the
lookup (under its per-key lock) before the compile, the store and load after it.
"""
from __future__ import annotations

import inspect
import pathlib
import re
import sys
import types

import pytest
import torch

import eagerc
import eagerc.per_op.resolver  # noqa: F401 - a process's first miss imports the rooms: not a step
from eagerc import _C
from eagerc.compile import op as op_compiler

HALL = "eagerc.per_op.resolver"
ROOMS = {"eagerc.targets": "targets", "eagerc.per_op.background": "background",
         "eagerc.cache": "cache", "eagerc.per_op.eager_rules": "eager_rules"}
# eagerc.kernel_key is a helper: the hall builds the miss's key (a value) with the miss,
# before background names its job; the service computes the namespace in its own visit.
HELPERS = {"eagerc.aten_meta", "eagerc._stats", "eagerc._config", "eagerc.refusals",
           "eagerc.artifact", "eagerc.per_op.registration", "eagerc.random_streams",
           "eagerc.per_op.miss", "eagerc.kernel_key"}
STEPS = ["targets", "background", "cache", "eager_rules", "compile", "cache"]
# A new device's miss asks eager's device rule before any answer (resolver.py: an interim
# answer on aliases would let a CPU tensor among the device's through), between the
# waiting-job look-up and the background decision.
STEPS_NEW_DEVICE = ["targets", "background", "eager_rules", "background", "cache", "eager_rules",
                    "compile", "cache"]


def room_of(module: str):
    """HALL, a room's name, None (a helper, or not eagerc), or 'unexpected:<module>'."""
    if module == HALL:
        return HALL
    if module in ROOMS:
        return ROOMS[module]
    if module.startswith(("eagerc.compile.", "eagerc.codegen")):
        return "compile"
    if module.startswith("kernel_cache") or module in HELPERS or not module.startswith("eagerc"):
        return None
    return f"unexpected:{module}"


class MissPath:
    """Rooms the hall enters, in order (consecutive calls into one room are one visit),
    and every call into the hall made from inside a room."""

    def __init__(self):
        self.visits: list = []
        self.callbacks: list = []
        self._stack: list = []  # (frame, room) of eagerc frames with a room, innermost last

    def profile(self, frame, event, arg):
        if event == "call":
            room = room_of(frame.f_globals.get("__name__", ""))
            if room is None:
                return
            enclosing = self._stack[-1][1] if self._stack else None
            if room == HALL and enclosing not in (None, HALL):
                self.callbacks.append(f"{enclosing} -> {frame.f_code.co_name}")
            elif room != HALL and enclosing == HALL and (not self.visits or self.visits[-1] != room):
                self.visits.append(room)
            self._stack.append((frame, room))
        elif event == "return" and self._stack and self._stack[-1][0] is frame:
            self._stack.pop()

    def record(self, call):
        sys.setprofile(self.profile)
        try:
            return call()
        finally:
            sys.setprofile(None)


def _devices():
    found = ["cpu"]
    if hasattr(torch, "eagerc") or torch._C._get_privateuse1_backend_name() == "eagerc":
        found.append("eagerc")
    return found


@pytest.mark.parametrize("device", _devices())
def test_one_miss_walks_the_rooms_once_in_order(fresh_cache, device):
    x = torch.randn(5, 7, dtype=torch.float64, device=device)
    path = MissPath()
    with eagerc.enabled(device, ops=None if device == "eagerc" else ["aten::abs"]):
        calls = _C._resolver_calls()
        y = path.record(lambda: torch.abs(x))
        assert _C._resolver_calls() == calls + 1
    assert torch.equal(y.cpu(), x.cpu().abs())
    compiled = {k: v["compiles"] for k, v in eagerc.stats()["ops"].items() if k.startswith("aten::abs")}
    assert list(compiled.values()) == [1], compiled  # the recorded call was a compiling miss
    assert path.callbacks == []
    assert path.visits == (STEPS_NEW_DEVICE if device == "eagerc" else STEPS), path.visits


def test_lifted_scalars_that_do_not_trace_are_answered_in_the_same_call(fresh_cache):
    # native_layer_norm's `float eps` takes no symbolic float: the lifted trace fails and
    # the same call goes on under its signature with values (the bridge's second round,
    # before). Eager's check runs once for the call; the refusal is recorded on the way.
    x = torch.randn(4, 8)
    ln = lambda: torch.nn.functional.layer_norm(x, (8,), torch.ones(8), torch.zeros(8))  # noqa: E731
    path = MissPath()
    with eagerc.enabled("cpu", ops=["aten::native_layer_norm"]):
        calls = _C._resolver_calls()
        y = path.record(ln)
        assert _C._resolver_calls() == calls + 1
        again = ln()
        assert _C._resolver_calls() == calls + 1  # keyed by values now: an L1 hit
    torch.testing.assert_close(y, ln())
    torch.testing.assert_close(again, ln())
    s = eagerc.stats()["ops"]["aten::native_layer_norm@CPU"]
    assert (s["compiles"], s["hits"], s["fallbacks"]) == (1, 1, 0), s
    assert path.callbacks == []
    assert path.visits == ["targets", "background", "cache", "eager_rules", "compile", "cache",
                           "background", "cache", "compile", "cache"]


def _one_by_one_convolution(out_channels: int):
    """A 1x1 convolution call: its kernels share one key, each pinned to its weight's
    output channels by its guard (ResNet's 1x1 convolutions: one variant per shape)."""
    x = torch.randn(2, 8, 6, 6, dtype=torch.float64)
    w = torch.randn(out_channels, 8, 1, 1, dtype=torch.float64)
    return (lambda: torch.ops.aten.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
            torch.nn.functional.conv2d(x, w))


def test_a_stored_variant_the_call_does_not_fit_is_passed_over_in_the_same_call(fresh_cache):
    # The resolver checks stored variants against the call's guard values and answers with
    # the one that fits, in one call (a round per variant, before); L1 keeps the variants
    # it passed over, so a call they fit is a hit.
    calls = {c: _one_by_one_convolution(c) for c in (16, 32)}
    with eagerc.enabled("cpu", ops=["aten::convolution"]):
        for c in (16, 32):
            calls[c][0]()  # both stored
    _C._clear_tables()  # a new process: the store has both variants, L1 none
    with eagerc.enabled("cpu", ops=["aten::convolution"]):
        before = _C._resolver_calls()
        got = {c: calls[c][0]() for c in (32, 16)}  # 32's miss passes 16's variant over
        assert _C._resolver_calls() == before + 1
    for c, (_, want) in calls.items():
        torch.testing.assert_close(got[c], want)
    s = eagerc.stats()["ops"]["aten::convolution@CPU"]
    assert (s["compiles"], s["disk_loads"], s["misses"], s["hits"]) == (2, 2, 3, 1), s


@pytest.mark.slow  # the compile service compiles a kernel: ~40 s on a busy 2-core machine
def test_in_background_a_passed_over_variant_goes_to_l1_and_the_service_compiles_one_that_fits(
        fresh_cache, monkeypatch):
    from eagerc.per_op import background

    sixteen, thirty_two = _one_by_one_convolution(16), _one_by_one_convolution(32)
    with eagerc.enabled("cpu", ops=["aten::convolution"]):
        sixteen[0]()  # stored
    _C._clear_tables()  # a new process
    monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
    eagerc.enable("cpu", ops=["aten::convolution"], compile="background")
    try:
        first = thirty_two[0]()   # 16's variant passed over (to L1): interim
        second = thirty_two[0]()  # its job names 16's variant: the service compiles 32's
        assert eagerc.wait_compiles(timeout=900)
        third = thirty_two[0]()   # the service's kernel
        again = sixteen[0]()      # 16's variant from L1: a hit
    finally:
        eagerc.disable("cpu")
        background.set_mode("cpu", None)
    for y in (first, second, third):
        torch.testing.assert_close(y, thirty_two[1])
    torch.testing.assert_close(again, sixteen[1])
    s = eagerc.stats()["ops"]["aten::convolution@CPU"]
    assert (s["interim"], s["background_compiles"], s["compiles"]) == (2, 1, 1), s


def test_the_miss_is_one_value_its_steps_read():
    # Each step of the hall takes the miss (and at most what it adds), not a thread of its
    # parts: the resolver's widest step took 12 parameters, compile_op 10, then 5.
    from eagerc.per_op import resolver

    steps = {name: len(inspect.signature(fn).parameters)
             for name, fn in vars(resolver).items()
             if inspect.isfunction(fn) and fn.__module__ == HALL}
    assert max(steps.values()) <= 3, steps
    assert steps["_kernel"] == steps["_answer"] == steps["_stored_or_interim"] == 1, steps
    assert list(inspect.signature(op_compiler.compile_op).parameters) == ["miss"]
    # Background compiles name and queue the job from the miss too (they took 4 parts each).
    from eagerc.per_op import background

    assert list(inspect.signature(background.job_for).parameters) == ["miss"]
    assert list(inspect.signature(background.Jobs.submit).parameters) == ["self", "miss"]


def _asks_the_hall():
    from eagerc.per_op import resolver

    return resolver._context_is_unusual()


def test_the_record_sees_a_callback_into_the_hall(fresh_cache, monkeypatch):
    import eagerc.cache

    # A function of the cache service's module (its globals) that calls back into the hall,
    # run by the compile step: what a get-or-compile service with a compile closure did.
    in_the_service = types.FunctionType(_asks_the_hall.__code__, vars(eagerc.cache))
    real = op_compiler.compile_op

    def compile_op(*args, **kwargs):
        in_the_service()
        return real(*args, **kwargs)

    monkeypatch.setattr(op_compiler, "compile_op", compile_op)
    path = MissPath()
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        path.record(lambda: torch.abs(torch.randn(3, dtype=torch.float64)))
    assert path.callbacks == ["cache -> _context_is_unusual"]
    assert path.visits == ["targets", "background", "cache", "eager_rules", "cache", "compile", "cache"]


def test_each_refusal_carries_its_record_and_its_answer():
    from eagerc.refusals import (IN_PROCESS, NOWHERE, ON_DISK, CompileError, EagerRaises,
                                 InductorFailed, NeedsHostAliases, NotCompiled, SpecializeValues,
                                 recorded)

    assert NeedsHostAliases("aten::mm").answer().action == "run_on_host_aliases"
    raised = EagerRaises("IndexError", "index 9 is out of bounds").answer()
    assert (raised.action, raised.error_kind, raised.reason) == (
        "raise_error", "IndexError", "index 9 is out of bounds")
    failed = InductorFailed("Inductor failed: boom").answer()
    assert (failed.action, failed.remember, failed.reason) == ("fallback", True, "Inductor failed: boom")
    assert CompileError("no C++ compiler", IN_PROCESS).answer().remember is True  # L1 only
    assert CompileError("inside a dispatch mode", NOWHERE).answer().remember is False
    assert NotCompiled("a refusal of no known kind").answer().remember is False
    # Only a call that cannot be keyed by its values gets SpecializeValues' own answer.
    assert SpecializeValues("lifted scalar").answer().action == "fallback"
    # What each leaves on disk, and what reads it back: the same kind with the same reason.
    for refusal, kind in ((NeedsHostAliases("aten::mm"), NeedsHostAliases),
                          (SpecializeValues("eps", ON_DISK), SpecializeValues),
                          (CompileError("no lowering"), CompileError),
                          (InductorFailed("Inductor failed: boom"), CompileError)):
        again = recorded({**refusal.record(), "op": "aten::mm"})
        assert type(again) is kind and str(again) == str(refusal), (refusal, again)
    for refusal in (EagerRaises("IndexError", "bad"), SpecializeValues("machine's"),
                    CompileError("busy", IN_PROCESS), CompileError("mode", NOWHERE)):
        assert refusal.record() is None
    assert recorded({"num_outputs": 1}) is None
    # And what the service logs: a failure at INFO (its chain at DEBUG), the others not as one.
    import logging

    assert CompileError("no lowering").log_line("aten::abs") == (
        logging.INFO, "aten::abs not compiled: no lowering")
    assert [(r.is_failure, r.log_line("aten::mm")[0]) for r in (
        NeedsHostAliases("aten::mm"), SpecializeValues("eps"))] == [(False, logging.INFO),
                                                                    (False, logging.DEBUG)]


_CHAIN_WALK = re.compile(r"__context__|inner_exception")


def test_an_exception_chain_is_walked_in_one_place():
    from eagerc.refusals import causes

    root = pathlib.Path(eagerc.__file__).parent
    walkers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if _CHAIN_WALK.search(p.read_text()))
    assert walkers == ["refusals.py"], walkers
    try:
        try:
            raise KeyError("inner")
        except KeyError as e:
            raise RuntimeError("outer") from e
    except RuntimeError as e:
        chained = e
    assert [type(c).__name__ for c in causes(chained)] == ["RuntimeError", "KeyError"]
