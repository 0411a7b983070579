"""module.to("eagerc") keeps tied parameters tied and keeps parameter objects, as CPU and
CUDA conversions do (eagerc/device/module_conversion.py), so a tied model trains as on CPU."""
from __future__ import annotations

import copy

import pytest
import torch

import eagerc  # noqa: F401  (registers the device)
from eagerc.testing import assert_close


def _tied():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16, bias=False))
    m[1].weight = m[0].weight
    return m


def _train_step(model, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.tensor([[1, 2, 3, 4]], device=device)
    loss = model(x).logsumexp(-1).sum()
    loss.backward()
    opt.step()
    return loss.detach().cpu()


def test_tied_weights_stay_tied_and_train_like_cpu():
    cpu = _tied()
    device = copy.deepcopy(cpu)
    before = device[0].weight
    device.to("eagerc")
    assert device[0].weight is device[1].weight is before  # same object, now on the device
    assert before.device.type == "eagerc"
    for _ in range(2):
        assert_close(_train_step(device, "eagerc"), _train_step(cpu, "cpu"))
    assert_close(device[0].weight.detach().cpu(), cpu[0].weight.detach())


def test_an_optimizer_made_before_the_move_still_steps_the_model():
    model = _tied()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to("eagerc")
    before = model[0].weight.detach().cpu().clone()
    model(torch.tensor([[1, 2]], device="eagerc")).sum().backward()
    opt.step()
    assert not torch.equal(model[0].weight.detach().cpu(), before)


def test_other_conversions_are_torch_own():
    model = _tied()
    assert not torch.__future__.get_swap_module_params_on_conversion()
    model.double()
    assert model[0].weight.dtype == torch.float64 and model[0].weight is model[1].weight
    assert not torch.__future__.get_swap_module_params_on_conversion()


@pytest.mark.slow
def test_gpt2_lm_head_stays_tied_on_the_device():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=32)
    cpu = transformers.GPT2LMHeadModel(config).train(False)
    device = copy.deepcopy(cpu).to("eagerc")
    assert device.lm_head.weight is device.transformer.wte.weight
    ids = torch.randint(0, 64, (1, 8))
    losses = []
    for model, dev in ((cpu, "cpu"), (device, "eagerc")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        out = model(ids.to(dev), labels=ids.to(dev))
        out.loss.backward()
        opt.step()
        losses.append(model(ids.to(dev), labels=ids.to(dev)).loss.detach().cpu())
    assert_close(losses[1], losses[0])
