"""Norm layers on the eagerc device (host memory) give CPU eager's results for inputs in
any layout, however a call no compiled kernel serves yet is answered: in the interim while
the compile service compiles its kernel (background mode, the default), or after its
compile failed (the fallback ladder).

Such a call runs the home's ATen kernel on aliases, what eager on the CPU runs, before the
CompositeExplicitAutograd kernel the device's key resolves to (KernelHolder::home_before_native):
the group_norm composite hands native_group_norm a channels-last X, which CPU's kernel
serves and math_group_norm's X.view(N, group, -1) cannot."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import eagerc
from eagerc.per_op import background
from eagerc.refusals import NOWHERE, CompileError
from eagerc.testing import assert_close

pytestmark = pytest.mark.skipif(torch._C._get_privateuse1_backend_name() != "eagerc",
                                reason="the eagerc device is not registered")


class _StillCompiling:
    """A compile service that takes every job and finishes none: each miss is answered in
    the interim, and nothing compiles on this busy machine's cores."""

    def submit(self, folder, job_id, data) -> bool:
        return True

    def outcome(self, folder, job_id):
        return None


@pytest.fixture
def interim_answers(fresh_cache, monkeypatch):
    monkeypatch.setattr(background, "client", lambda: _StillCompiling())
    monkeypatch.setattr(background, "_jobs", background.Jobs())
    background.set_mode("eagerc", "background")
    yield "interim"
    background.set_mode("eagerc", None)


@pytest.fixture
def failing_compiles(fresh_cache, monkeypatch):
    """Every compile fails ("now" mode, as the tests run): the fallback ladder answers."""
    from eagerc.compile import op as op_compiler

    def fail(*args, **kwargs):
        raise CompileError("the C++ compiler could not run (injected)", NOWHERE)

    monkeypatch.setattr(op_compiler, "compile_op", fail)
    yield "aliased"


@pytest.fixture(params=["interim_answers", "failing_compiles"])
def unserved(request):
    """How a call no compiled kernel serves is answered: the stats counter it moves."""
    return request.getfixturevalue(request.param)


def _channels_last(shape):
    return torch.randn(shape).to(memory_format=torch.channels_last)


def _sliced(shape):
    # Every other column of a wider tensor: no dense layout at all.
    n, c, h, w = shape
    return torch.randn(n, c, h, 2 * w)[..., ::2]


def _transposed(shape):
    n, c, h, w = shape
    return torch.randn(n, c, w, h).transpose(2, 3)


def _batch_norm_eval():
    bn = nn.BatchNorm2d(16)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    return bn.eval()


MODULES = {
    "group_norm": lambda: nn.GroupNorm(4, 16),
    "layer_norm": lambda: nn.LayerNorm([4, 4]),
    "batch_norm_eval": _batch_norm_eval,
    "instance_norm": lambda: nn.InstanceNorm2d(16, affine=True),
}
LAYOUTS = {"channels_last": _channels_last, "sliced": _sliced, "transposed": _transposed}


def _served_op(name: str) -> str:
    return {"group_norm": "aten::native_group_norm", "layer_norm": "aten::native_layer_norm",
            "batch_norm_eval": "aten::native_batch_norm",
            "instance_norm": "aten::native_batch_norm"}[name] + "@PrivateUse1"


def test_group_norm_of_a_channels_last_input_is_answered_as_cpu_eager(interim_answers):
    torch.manual_seed(0)
    norm = nn.GroupNorm(4, 16)
    x = torch.randn(2, 16, 4, 4).to(memory_format=torch.channels_last)
    want = norm(x)
    got = norm.to("eagerc")(x.to("eagerc"))
    assert_close(got.cpu(), want)
    assert got.stride() == want.stride()
    assert eagerc.stats()["ops"]["aten::native_group_norm@PrivateUse1"]["interim"] > 0


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(MODULES))
def test_norms_of_any_layout_are_answered_as_cpu_eager(unserved, name, layout):
    torch.manual_seed(0)
    module = MODULES[name]()
    x = LAYOUTS[layout]((2, 16, 4, 4))
    with torch.no_grad():
        want = module(x)
        device_module = module.to("eagerc")
        got = device_module(x.to("eagerc"))
    assert_close(got.cpu(), want)
    assert got.stride() == want.stride()
    counters = eagerc.stats()["ops"][_served_op(name)]
    assert counters[unserved] > 0, counters
