"""warm_cache on models that share tensors: tied weights (a T5 encoder's and GPT-2's LM
head tied to the embedding, as transformers ties them), a buffer held by two modules, a
module called twice. Discovery runs the whole model, and the first real run afterwards
compiles nothing. A discovery that stops early says so, loudly, and the CLI exits 1."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

pytestmark = pytest.mark.warm


def _on_device(model: torch.nn.Module) -> torch.nn.Module:
    """``model.to("eagerc")`` with its ties kept. A plain ``.to`` makes a new Parameter per
    module for a device whose tensors cannot take a CPU tensor's metadata (torch's
    has_compatible_shallow_copy_type lists no PrivateUse1 device; "meta" unties the same
    way), so each user of a tied weight would get its own copy; swapping keeps each
    Parameter object, and so the ties."""
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        return model.to("eagerc")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)


def _first_run_compiles(model, *inputs) -> int:
    """Kernels compiled by one forward without grad and one with (the two reach different
    kernels), as a real first run does."""
    eagerc.reset_stats()
    with torch.no_grad():
        model(*inputs)
    model(*inputs)
    return eagerc.stats()["compiles"]


class _SharedParts(torch.nn.Module):
    """One Linear called twice, one buffer held by two submodules, an output layer tied to
    the first layer's weight (transposed use)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.left, self.right = torch.nn.Module(), torch.nn.Module()
        scale = torch.full((6,), 0.5)
        self.left.register_buffer("scale", scale)
        self.right.register_buffer("scale", scale)
        self.out = torch.nn.Linear(6, 6, bias=False)
        self.out.weight = self.proj.weight

    def forward(self, x):
        h = torch.tanh(self.proj(x)) * self.left.scale
        h = torch.relu(self.proj(h)) + self.right.scale
        return self.out(h).log_softmax(-1)


@pytest.mark.slow
def test_shared_parameters_buffers_and_a_module_used_twice(fresh_cache):
    torch.manual_seed(0)
    model = _SharedParts()
    assert len(dict(model.named_parameters(remove_duplicate=False))) > len(list(model.parameters()))
    device_model = _on_device(_SharedParts())
    assert device_model.out.weight is device_model.proj.weight
    device_model.right.scale = device_model.left.scale  # .to gives each module its buffer
    device_model.load_state_dict(model.state_dict())
    x = torch.randn(3, 6)
    report = eagerc.warm_cache(device_model, x.to("eagerc"), workers=1, train=True)
    assert report.complete and report.discovery_stopped is None, str(report)
    assert report.failed == [] and report.compiled > 0, str(report)
    assert "STOPPED" not in str(report)
    assert _first_run_compiles(device_model, x.to("eagerc")) == 0
    # The warmed training step: backward and SGD's step over the deduplicated parameters.
    eagerc.reset_stats()
    loss = device_model(x.to("eagerc")).sum()
    loss.backward()
    torch.optim.SGD(device_model.parameters(), lr=1e-3).step()
    compiled = {op: c["compiles"] for op, c in eagerc.stats()["ops"].items() if c["compiles"]}
    assert compiled == {}
    model(x).sum().backward()
    torch.optim.SGD(model.parameters(), lr=1e-3).step()
    with torch.no_grad():
        assert_close(device_model(x.to("eagerc")).cpu(), model(x))


def _tiny_t5(transformers):
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1,
                                num_heads=2)
    assert cfg.tie_word_embeddings  # what transformers sets by default
    # Eager attention: with SDPA the device's grad-mode forward stops at
    # _scaled_dot_product_flash_attention_for_cpu with a position bias that requires grad
    # (the same error a real run raises), which is the device's attention choice, not warm's.
    return transformers.T5EncoderModel._from_config(cfg, attn_implementation="eager").eval()


def _tiny_gpt2(transformers):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(cfg).eval()


@pytest.mark.slow
@pytest.mark.parametrize("build, confirm", [(_tiny_t5, False), (_tiny_gpt2, True)],
                         ids=["t5_encoder", "gpt2_lm_head"])
def test_tied_transformers_models(build, confirm, fresh_cache):
    # GPT-2 builds its causal mask another way while traced (transformers' is_tracing), so
    # the fake run reaches another attention kernel than the real one: confirm=True's real
    # forward compiles that one, as for BERT (tests/test_warm.py).
    transformers = pytest.importorskip("transformers")
    model = build(transformers)
    names = dict(model.named_parameters(remove_duplicate=False))
    assert len(names) > len(list(model.parameters())), "the model should have tied weights"
    ids = torch.randint(0, 64, (2, 7))
    device_model = _on_device(build(transformers))
    if confirm:  # confirm's real forward needs the model where it runs
        report = eagerc.warm_cache(device_model, ids.to("eagerc"), workers=1, confirm=True)
        assert report.compiled_on_confirm <= 3, str(report)
    else:  # warmed from the CPU model for the device: only metadata is used
        report = eagerc.warm_cache(model, ids, device="eagerc", workers=1)
    assert report.complete, str(report)
    assert report.failed == [] and report.compiled > 0, str(report)
    assert _first_run_compiles(device_model, ids.to("eagerc")) == 0
    with torch.no_grad():
        got = device_model(ids.to("eagerc"))
        want = model(ids)
    key = "logits" if "logits" in want else "last_hidden_state"
    assert_close(got[key].cpu(), want[key], model=True)


class _BranchesOnData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.sum().item() > 0:  # a value fake tensors do not have
            return h.relu()
        return h.sigmoid()


def test_a_discovery_that_stops_early_says_so(fresh_cache):
    model = _BranchesOnData().to("eagerc")
    with pytest.warns(RuntimeWarning, match="discovery stopped early, in the forward without grad"):
        report = eagerc.warm_cache(model, torch.randn(2, 4).to("eagerc"), workers=0)
    assert not report.complete
    assert report.discovery_stopped.startswith("in the forward without grad, ")
    text = str(report)
    assert text.splitlines()[1].startswith("  DISCOVERY STOPPED EARLY in the forward without grad")
    assert "the first real run compiles them" in text
    assert report.calls > 0  # what was found before the stop is still warmed


@pytest.mark.slow
def test_command_line_exits_1_when_discovery_stopped(fresh_cache, tmp_path):
    (tmp_path / "branchy.py").write_text(textwrap.dedent("""
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                return x.relu() if x.sum().item() > 0 else x.sigmoid()

        def model():
            return M(), torch.randn(3).to("eagerc")
    """))
    result = subprocess.run([sys.executable, "-m", "eagerc", "warm", "branchy:model", "--workers", "0"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "DISCOVERY STOPPED EARLY" in result.stdout
