"""Whole models on the eagerc device (issue 3): transformers models nobody here wrote
(small configs, random init, never downloaded weights) run forward on "eagerc" and match
CPU eager with zero fallbacks; one training step of an MLP (SGD) and of a CNN (AdamW)
leaves the same parameters as on CPU.

Every compute op reached here is compiled by Inductor on its first call, so the first run
of this file is cold (tens of seconds per model); the session cache in conftest.py shares
kernels between the tests.
"""
import copy

import pytest
import torch
from torch import nn

import eagerc
from eagerc.testing import assert_close

transformers = pytest.importorskip("transformers")

DEV = "eagerc"


def _unexpected_fallbacks(stats) -> dict:
    """Fallbacks other than eagerc/compile/known_wrong.py's refusals (calls Inductor computes
    to other values than eager, such as float32 gelu against ATen's oneDNN: eager's kernel
    runs them by design)."""
    from eagerc.compile import known_wrong

    by_design = known_wrong.all_reasons()
    found = {k: {why: n for why, n in v["fallback_reasons"].items() if why not in by_design}
             for k, v in stats["ops"].items() if v["fallbacks"]}
    return {k: v for k, v in found.items() if v}


def _to_cpu(value):
    """Model outputs (ModelOutput / dict / tuple / tensor) moved to CPU, as a dict or tuple."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):  # transformers' ModelOutput is an OrderedDict
        return {k: _to_cpu(v) for k, v in value.items() if v is not None}
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def _assert_on_device(value):
    if isinstance(value, torch.Tensor):
        assert value.device.type == DEV, value.device
    elif isinstance(value, dict):
        for v in value.values():
            _assert_on_device(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _assert_on_device(v)


# ---------------------------------------------------------------- models

def bert():
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=100,
                                  max_position_embeddings=64)
    ids = torch.randint(0, 100, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0  # padding: exercises the extended attention mask
    return transformers.BertModel(cfg), {"input_ids": ids, "attention_mask": mask}


def gpt2():
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100,
                                  n_positions=64, bos_token_id=0, eos_token_id=0,
                                  use_cache=False)  # logits only: no KV cache object
    return transformers.GPT2LMHeadModel(cfg), {"input_ids": torch.randint(0, 100, (2, 16))}


def resnet():
    cfg = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])
    return transformers.ResNetModel(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}


def vit():
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, image_size=32, patch_size=8)
    return transformers.ViTModel(cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}


@pytest.mark.slow
@pytest.mark.parametrize("build", [bert, gpt2, resnet, vit], ids=lambda f: f.__name__)
def test_model_forward_matches_cpu(build):
    torch.manual_seed(0)
    model, inputs = build()
    model.eval()
    with torch.no_grad():
        expected = _to_cpu(model(**inputs))

        dev_model = copy.deepcopy(model).to(DEV)
        dev_inputs = {k: v.to(DEV) for k, v in inputs.items()}
        eagerc.reset_stats()
        out = dev_model(**dev_inputs)
        stats = eagerc.stats()

    _assert_on_device(out)
    got = _to_cpu(out)
    assert list(got.keys()) == list(expected.keys())
    assert_close(got, expected, model=True)
    assert not _unexpected_fallbacks(stats), _unexpected_fallbacks(stats)
    assert stats["hits"] + stats["misses"] > 0  # compute really went through eagerc

    # A second call (warm: every kernel loaded) gives the same result.
    with torch.no_grad():
        again = _to_cpu(dev_model(**dev_inputs))
    assert_close(again, expected, model=True)


# ---------------------------------------------------------------- training

def _train_step(model, opt, x, y, loss_fn):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def _check_training_step(model, make_opt, x, y, loss_fn):
    dev_model = copy.deepcopy(model).to(DEV)
    cpu_loss = _train_step(model, make_opt(model.parameters()), x, y, loss_fn)

    eagerc.reset_stats()
    dev_loss = _train_step(dev_model, make_opt(dev_model.parameters()), x.to(DEV), y.to(DEV),
                           loss_fn)
    stats = eagerc.stats()

    assert dev_loss.device.type == DEV
    assert_close(dev_loss.cpu(), cpu_loss, model=True)
    cpu_params = dict(model.named_parameters())
    for name, p in dev_model.named_parameters():
        assert p.device.type == DEV, name
        assert p.grad is not None and p.grad.device.type == DEV, name
        assert_close(p.grad.cpu(), cpu_params[name].grad, model=True, msg=f"grad of {name}")
        assert_close(p.detach().cpu(), cpu_params[name].detach(), model=True, msg=name)
    for name, b in dev_model.named_buffers():  # BatchNorm running stats
        assert_close(b.cpu(), dict(model.named_buffers())[name], model=True, msg=name)
    assert not _unexpected_fallbacks(stats), _unexpected_fallbacks(stats)


@pytest.mark.slow
def test_mlp_training_step_sgd_matches_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 5))
    x, y = torch.randn(8, 20), torch.randint(0, 5, (8,))
    _check_training_step(model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                         x, y, nn.CrossEntropyLoss())


@pytest.mark.slow
def test_cnn_training_step_adamw_matches_cpu():
    torch.manual_seed(0)
    # No conv bias before BatchNorm: BN cancels it, so its gradient is rounding noise
    # (~1e-8) that AdamW's m/sqrt(v) turns into a full +-lr step of either sign.
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    )
    model.train()
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    _check_training_step(model, lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
                         x, y, nn.CrossEntropyLoss())
