"""Convolutions train on the eagerc device: forward, the op after it, backward and an
optimizer step give CPU eager's results, whichever way each call is served.

A convolution's composite kernels pick a backend by the tensors' device type
(convolution -> _convolution -> convolution_overrideable; convolution_backward ->
convolution_backward_overrideable), and a PrivateUse1 device has neither. While a compiled
kernel serves every call this never shows; a call answered before its kernel exists (the
background mode's interim answer) or after its compile failed reaches those composites,
and must then run on the home's kernel on aliases (KernelHolder::run_native)."""
import pytest
import torch
from torch import nn

import eagerc
from eagerc.refusals import NOWHERE, CompileError
from eagerc.testing import assert_close

# name -> (module factory, input shape)
CASES = {
    "conv1d_stride": (lambda: nn.Conv1d(3, 6, 3, stride=2), (2, 3, 11)),
    "conv2d_no_bias": (lambda: nn.Conv2d(3, 8, 3, padding=1, bias=False), (4, 3, 8, 8)),
    "conv2d_groups_dilation": (lambda: nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2), (2, 4, 7, 9)),
    "conv2d_depthwise": (lambda: nn.Conv2d(4, 4, 3, stride=2, groups=4, bias=False), (2, 4, 9, 9)),
    "conv3d": (lambda: nn.Conv3d(2, 4, 2, stride=(1, 2, 1), padding=1), (1, 2, 4, 5, 4)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1), (2, 3, 5, 5)),
}


def _pair(case):
    factory, shape = CASES[case]
    torch.manual_seed(0)
    conv = factory()
    model = nn.Sequential(conv, nn.ReLU())
    device_model = nn.Sequential(factory(), nn.ReLU()).to("eagerc")
    device_model.load_state_dict(model.state_dict())
    return model, device_model, torch.randn(shape)


def _train_step_matches_cpu(case):
    model, device_model, x = _pair(case)
    for m, inp in ((model, x), (device_model, x.to("eagerc"))):
        out = m(inp)
        # An op after the convolution, so its backward gets a dense gradient, not the
        # expanded one of a bare .sum().
        (out * out).mean().backward()
    for p, q in zip(model.parameters(), device_model.parameters()):
        assert q.grad.device.type == "eagerc"
        assert_close(q.grad.cpu(), p.grad)


@pytest.fixture
def failing_compiles(fresh_cache, monkeypatch):
    """Every compile fails as a busy machine's can (not a property of the signature)."""
    from eagerc.compile import op as op_compiler

    def fail(*args, **kwargs):
        raise CompileError("the C++ compiler could not run (injected)", NOWHERE)

    monkeypatch.setattr(op_compiler, "compile_op", fail)
    yield


@pytest.mark.parametrize("case", sorted(CASES))
def test_training_is_right_when_every_compile_fails(failing_compiles, case):
    _train_step_matches_cpu(case)
    ops = eagerc.stats()["ops"]
    # The composites' device-type choice was answered on the home's kernel.
    assert ops["aten::convolution_backward@PrivateUse1"]["aliased"] >= 1


@pytest.mark.parametrize("case", ["conv2d_no_bias", "conv1d_stride"])
def test_training_is_right_while_kernels_compile_in_the_background(fresh_cache, case):
    from eagerc.per_op import background

    eagerc.enable("eagerc", compile="background")
    try:
        _train_step_matches_cpu(case)
        assert eagerc.stats()["ops"]["aten::convolution_backward@PrivateUse1"]["interim"] >= 1
    finally:
        eagerc.wait_compiles()
        background.set_mode("eagerc", None)


def test_training_with_compiled_kernels(fresh_cache):
    _train_step_matches_cpu("conv2d_no_bias")
    ops = eagerc.stats()["ops"]
    assert ops["aten::convolution_backward@PrivateUse1"]["compiles"] == 1
    assert ops["aten::convolution_backward@PrivateUse1"]["fallbacks"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_convolution_kind_trains_with_compiled_kernels(fresh_cache, case):
    _train_step_matches_cpu(case)


@pytest.mark.slow
def test_a_small_cnn_takes_adamw_steps_as_cpu_does(fresh_cache):
    def cnn():
        # No convolution bias before the batch norm: its gradient is zero up to rounding,
        # and Adam's normalized step would turn rounding noise into +-lr.
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Flatten(), nn.Linear(8 * 8 * 8, 10))

    torch.manual_seed(0)
    model, device_model = cnn(), cnn().to("eagerc")
    device_model.load_state_dict(model.state_dict())
    x, y = torch.randn(4, 3, 8, 8), torch.tensor([1, 0, 3, 9])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    device_opt = torch.optim.AdamW(device_model.parameters(), lr=1e-2)
    for _ in range(3):
        for m, o, inp, target in ((model, opt, x, y), (device_model, device_opt, x.to("eagerc"), y.to("eagerc"))):
            o.zero_grad()
            nn.functional.cross_entropy(m(inp), target).backward()
            o.step()
    for p, q in zip(model.parameters(), device_model.parameters()):
        assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)
