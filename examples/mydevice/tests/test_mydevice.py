"""mydevice runs models with kernels eagerc compiles: results equal CPU eager's."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import eagerc
from conftest import OWN_KERNELS

transformers = pytest.importorskip("transformers")

# What a device must hand-write: allocation, copies, scalar reads, storage mutation and the
# per-backend views. Nothing that computes.
RUNTIME = {"aten::empty.memory_format", "aten::empty_strided", "aten::_copy_from",
           "aten::_copy_from_and_resize", "aten::_local_scalar_dense", "aten::resize_",
           "aten::set_", "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset",
           "aten::set_.source_Tensor", "aten::as_strided", "aten::view", "aten::_reshape_alias",
           "aten::unfold", "aten::view_as_real", "aten::view_as_complex"}


def close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual.cpu() if isinstance(actual, torch.Tensor) else actual, expected,
                               rtol=tol, atol=tol)


def test_the_device_has_only_its_runtime_and_eagerc_serves_it():
    assert set(OWN_KERNELS) == RUNTIME
    assert torch._C._get_privateuse1_backend_name() == "mydevice"  # eagerc left it alone
    target = eagerc.targets.for_device("mydevice")
    assert (target.codegen.name, target.home, target.new_device) == ("cpp", "cpu", True)
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "PrivateUse1")


def test_ops_compile_and_hit():
    x = torch.randn(5, 7)
    eagerc.reset_stats()
    for _ in range(2):
        close(torch.softmax(x.to("mydevice"), -1), torch.softmax(x, -1))
    counters = eagerc.stats()["ops"]["aten::_softmax@PrivateUse1"]
    assert counters["misses"] == 1 and counters["hits"] == 1


def tiny_bert(dropout: float = 0.1):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=100, max_position_embeddings=64,
                                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return transformers.BertModel(cfg)


def test_bert_forward():
    model = tiny_bert().eval()
    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0
    with torch.no_grad():
        want = model(ids, attention_mask=mask)
        got = copy.deepcopy(model).to("mydevice")(ids.to("mydevice"), attention_mask=mask.to("mydevice"))
    assert got.last_hidden_state.device.type == "mydevice"
    close(got.last_hidden_state, want.last_hidden_state)
    close(got.pooler_output, want.pooler_output)


def test_resnet_forward():
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
                                    depths=[1, 1], layer_type="basic")
    model = transformers.ResNetModel(cfg).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        want = model(x)
        got = copy.deepcopy(model).to("mydevice")(x.to("mydevice"))
    close(got.last_hidden_state, want.last_hidden_state)
    close(got.pooler_output, want.pooler_output)


def test_bert_training_step():
    # No dropout: the two runs draw different random numbers otherwise.
    model = tiny_bert(dropout=0.0).train()
    head = torch.nn.Linear(32, 3)
    ids = torch.randint(0, 100, (4, 10))
    labels = torch.tensor([0, 2, 1, 2])

    def step(model, head, ids, labels):
        params = list(model.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=1e-2)
        loss = F.cross_entropy(head(model(ids).pooler_output), labels)
        loss.backward()
        opt.step()
        return loss.detach(), [p.detach() for p in params]

    dev = "mydevice"
    dev_model, dev_head = copy.deepcopy(model).to(dev), copy.deepcopy(head).to(dev)
    want_loss, want_params = step(model, head, ids, labels)
    got_loss, got_params = step(dev_model, dev_head, ids.to(dev), labels.to(dev))
    assert got_params[0].device.type == dev
    close(got_loss, want_loss)
    for got, want in zip(got_params, want_params):
        close(got, want)
