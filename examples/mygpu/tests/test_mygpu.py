"""mygpu (CUDA memory under its own allocator, Triton kernels eagerc compiles) runs models:
results equal CPU eager's. Skipped where torch sees no CUDA GPU.

Installed, mygpu was imported by `import torch` (its torch.backends entry point) and
imported eagerc; from a checkout, it is imported here before eagerc (eagerc imported first
would take PrivateUse1 for its own device)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    pytest.skip("mygpu's memory is CUDA memory: needs a CUDA GPU", allow_module_level=True)

import mygpu  # noqa: E402,F401  (before eagerc: it renames PrivateUse1)
import eagerc  # noqa: E402  (serves every other op on mygpu)
from eagerc.testing import assert_close  # noqa: E402

transformers = pytest.importorskip("transformers")

DEV = "mygpu"
# What a device must hand-write: allocation, copies, scalar reads, storage mutation and the
# per-backend views. Nothing that computes.
RUNTIME = {"aten::empty.memory_format", "aten::empty_strided", "aten::_copy_from",
           "aten::_copy_from_and_resize", "aten::_local_scalar_dense", "aten::resize_",
           "aten::set_", "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset",
           "aten::set_.source_Tensor", "aten::as_strided", "aten::view", "aten::_reshape_alias",
           "aten::unfold", "aten::view_as_real", "aten::view_as_complex"}


def own_kernels() -> list:
    """The ATen kernels mygpu registers itself, read in a fresh interpreter that imports it
    alone (autoload off)."""
    script = ("import json, torch, mygpu\n"
              "print(json.dumps(sorted(op for op in torch._C._dispatch_get_registrations_for_dispatch_key("
              "'PrivateUse1') if op.startswith('aten::'))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    return json.loads(done.stdout.splitlines()[-1])


def close(actual, expected):
    assert_close(actual.cpu() if isinstance(actual, torch.Tensor) else actual, expected, model=True)


def test_the_device_has_only_its_runtime_and_eagerc_serves_it_with_triton():
    assert set(own_kernels()) == RUNTIME
    assert torch._C._get_privateuse1_backend_name() == DEV  # eagerc left it alone
    target = eagerc.targets.for_device(DEV)
    assert (target.codegen.name, target.home, target.host_aliases, target.new_device) == (
        "triton", "cuda", True, True)
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "PrivateUse1")


def test_memory_is_cuda_memory_from_its_own_allocator():
    torch.cuda.synchronize()
    free_before, reserved_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    x = torch.empty(64 * 2**20, dtype=torch.float32, device=DEV)  # 256 MiB
    assert x.device == torch.device(DEV, 0)
    # The GPU's free memory shrank by the tensor; PyTorch's caching allocator holds none of it.
    assert free_before - torch.cuda.mem_get_info()[0] >= x.nbytes
    assert torch.cuda.memory_reserved() == reserved_before
    del x
    torch.cuda.synchronize()
    assert torch.cuda.mem_get_info()[0] >= free_before - 4 * 2**20  # cudaFree gave it back
    y = torch.empty(1000, device=DEV).fill_(2.0)  # a Triton kernel on the device's own memory
    assert y.device.type == DEV and torch.equal(y.cpu(), torch.full((1000,), 2.0))


def test_ops_compile_and_hit():
    x = torch.randn(5, 7)
    eagerc.reset_stats()
    for _ in range(2):
        close(torch.softmax(x.to(DEV), -1), torch.softmax(x, -1))
    counters = eagerc.stats()["ops"]["aten::_softmax@PrivateUse1"]
    assert counters["misses"] == 1 and counters["hits"] == 1, counters
    assert counters["fallbacks"] == 0, counters


def test_copies_keep_values_and_layouts():
    x = torch.randn(6, 8)
    d = x.to(DEV)
    assert torch.equal(d.cpu(), x)
    assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())  # a strided read
    assert torch.equal(d.to(torch.float64).cpu(), x.to(torch.float64))  # a dtype conversion
    on_cuda = d.to("cuda")
    assert on_cuda.device.type == "cuda" and torch.equal(on_cuda.cpu(), x)
    grown = torch.empty(0, device=DEV)
    grown.resize_(5, 8).copy_(x[:5])
    grown.resize_(6, 8)  # grows through the hooks, keeping the first rows
    assert torch.equal(grown[:5].cpu(), x[:5])


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
        got = copy.deepcopy(model).to(DEV)(ids.to(DEV), attention_mask=mask.to(DEV))
    assert got.last_hidden_state.device.type == DEV
    close(got.last_hidden_state, want.last_hidden_state)
    close(got.pooler_output, want.pooler_output)


def test_resnet_forward():
    # transformers' ResNet: convolutions, batch norm, pooling (no torchvision).
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
                                    depths=[1, 1], layer_type="basic")
    model = transformers.ResNetModel(cfg).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        want = model(x)
        got = copy.deepcopy(model).to(DEV)(x.to(DEV))
    assert got.last_hidden_state.device.type == DEV
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

    dev_model, dev_head = copy.deepcopy(model).to(DEV), copy.deepcopy(head).to(DEV)
    want_loss, want_params = step(model, head, ids, labels)
    got_loss, got_params = step(dev_model, dev_head, ids.to(DEV), labels.to(DEV))
    assert got_params[0].device.type == DEV
    close(got_loss, want_loss)
    for got, want in zip(got_params, want_params):
        close(got, want)
