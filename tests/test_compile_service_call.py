"""A miss described for the compile service (eagerc/compile_service/call.py): a call whose
tensors hold more than STANDIN_BYTES_LIMIT is not described (the replay's stand-ins would
take as much memory in a worker), and compiles in the caller's process."""
from __future__ import annotations

import pytest
import torch

import eagerc
from eagerc import targets
from eagerc.compile_service import call
from eagerc.per_op import background
from eagerc.testing import assert_close


def _describe(*args):
    return call.describe("aten::mul.Tensor", args, False, b"sig", False, (), targets.for_device("cpu"))


def test_stand_in_bytes_count_each_tensors_storage_extent():
    x = torch.empty(10, 30)
    described = _describe(x, x[:, ::3])
    # 300 float32 elements, and a view whose storage extent is 9 * 30 + 27 + 1 elements.
    assert described.standin_bytes() == (300 + 298) * 4


def test_a_call_over_the_limit_is_not_described(monkeypatch):
    monkeypatch.setattr(call, "STANDIN_BYTES_LIMIT", 1000)
    assert _describe(torch.empty(250)) is not None
    assert _describe(torch.empty(251)) is None
    assert _describe([torch.empty(200), torch.empty(51)]) is None


@pytest.fixture
def background_cpu(fresh_cache, monkeypatch):
    monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
    monkeypatch.setenv("EAGERC_COMPILE", "background")
    eagerc.enable("cpu", ops=["aten::mul.Tensor"], compile="background")
    yield
    eagerc.disable("cpu")
    background.set_mode("cpu", None)


def test_a_call_over_the_limit_compiles_in_the_callers_process(background_cpu, monkeypatch):
    monkeypatch.setattr(call, "STANDIN_BYTES_LIMIT", 1000)
    x = torch.randn(20, 10)                 # 800 bytes, twice: over the limit
    got = torch.mul(x, x)
    s = eagerc.stats()["ops"]["aten::mul.Tensor@CPU"]
    assert s["interim"] == 0 and s["background_compiles"] == 0 and s["compiles"] == 1, s
    eagerc.disable("cpu")
    assert_close(got, x * x)
