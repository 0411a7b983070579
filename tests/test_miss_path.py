"""The op miss path is one pass (docs/architecture.md, "The miss path, room by room").

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
  compile) and eagerc/per_op/registration.py (the bridge's entrance that hands the miss to the hall).

The test asserts that nothing calls back into the hall from inside a room (no closures or
callbacks: the service is passive), that no other eagerc module is visited, and that the
rooms come in the order of the steps, each once, except the service, visited twice: the
lookup (under its per-key lock) before the compile, the store and load after it.
"""
from __future__ import annotations

import sys
import types

import pytest
import torch

import eagerc
import eagerc.per_op.resolver  # noqa: F401 - a process's first miss imports the rooms: not a step
from eagerc.compile import op as op_compiler

HALL = "eagerc.per_op.resolver"
ROOMS = {"eagerc.targets": "targets", "eagerc.per_op.background": "background",
         "eagerc.cache": "cache", "eagerc.kernel_key": "cache",  # the service's key
         "eagerc.per_op.eager_rules": "eager_rules"}
HELPERS = {"eagerc.aten_meta", "eagerc._stats", "eagerc._config", "eagerc.refusals",
           "eagerc.artifact", "eagerc.per_op.registration", "eagerc.random_streams"}
STEPS = ["targets", "background", "cache", "eager_rules", "compile", "cache"]


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
        y = path.record(lambda: torch.abs(x))
    assert torch.equal(y.cpu(), x.cpu().abs())
    compiled = {k: v["compiles"] for k, v in eagerc.stats()["ops"].items() if k.startswith("aten::abs")}
    assert list(compiled.values()) == [1], compiled  # the recorded call was a compiling miss
    assert path.callbacks == []
    assert path.visits == STEPS


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


def test_each_refusal_has_one_answer():
    from eagerc.per_op.resolver import answer
    from eagerc.refusals import (IN_PROCESS, NOWHERE, CompileError, EagerRaises, InductorFailed,
                                 NeedsHostAliases, NotCompiled, SpecializeValues)

    assert answer(NeedsHostAliases("aten::mm")).action == "run_on_host_aliases"
    assert answer(SpecializeValues("lifted scalar")).action == "specialize_values"
    raised = answer(EagerRaises("IndexError", "index 9 is out of bounds"))
    assert (raised.action, raised.error_kind, raised.reason) == (
        "raise_error", "IndexError", "index 9 is out of bounds")
    recorded = answer(InductorFailed("Inductor failed: boom"))
    assert (recorded.action, recorded.remember, recorded.reason) == (
        "fallback", True, "Inductor failed: boom")
    assert answer(CompileError("no C++ compiler", IN_PROCESS)).remember is True  # L1 only
    assert answer(CompileError("inside a dispatch mode", NOWHERE)).remember is False
    assert answer(NotCompiled("a refusal of no known kind")).remember is False
