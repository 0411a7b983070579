"""warm_cache (eagerc/warm/): every kernel a model needs is compiled ahead of its first
run, found without running it (fake tensors), compiled in worker processes; afterwards
the model's real runs, at other sizes of the same ranks too, compile nothing."""
from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

pytestmark = pytest.mark.warm


def bert_inputs(batch, length):
    ids = torch.randint(0, 100, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, length // 2:] = 0   # padding: the extended attention mask
    return ids, mask


@pytest.mark.slow
def test_model_runs_after_warming_compile_nothing(fresh_cache, tiny_bert):
    # transformers' BERT: warmed on one input, then run at other sizes of the same ranks.
    # Under fake tensors transformers skips its attention-mask shortcut (is_tracing), so
    # the real path's mask check is reached only by confirm=True's real forward.
    model = tiny_bert()
    device_model = tiny_bert().to("eagerc")
    ids, mask = bert_inputs(2, 16)
    report = eagerc.warm_cache(device_model, ids.to("eagerc"), mask.to("eagerc"), workers=2,
                               confirm=True)
    assert report.failed == [] and report.discovery_stopped is None, str(report)
    assert report.compiled > 0 and report.ops_found >= 10 and report.workers == 2
    assert report.compiled_on_confirm <= 3, str(report)   # the fake run found the rest
    assert "kernels compiled" in str(report)
    eagerc.reset_stats()
    for batch, length in ((2, 16), (3, 9), (4, 50)):
        ids, mask = bert_inputs(batch, length)
        with torch.no_grad():
            got = device_model(ids.to("eagerc"), mask.to("eagerc")).last_hidden_state.cpu()
            want = model(ids, mask).last_hidden_state
        assert_close(got, want)
    s = eagerc.stats()
    assert s["compiles"] == 0, {k: v for k, v in s["ops"].items() if v["compiles"]}
    from eagerc.compile.known_wrong import all_reasons

    # BERT's float32 gelu runs eager's (oneDNN's) kernel by design: not a missed kernel.
    unexpected = {k: why for k, v in s["ops"].items() for why in v["fallback_reasons"]
                  if why not in all_reasons()}
    assert s["hits"] > 0 and not unexpected, unexpected


@pytest.mark.slow
def test_torch_nn_model_needs_no_confirming_run(fresh_cache):
    # Code that does not branch on tracing or data: the fake run finds every kernel.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10),
        torch.nn.LogSoftmax(dim=-1)).eval()
    device_model = copy.deepcopy(model).to("eagerc")
    report = eagerc.warm_cache(device_model, torch.randn(2, 3, 8, 8).to("eagerc"), workers=2)
    assert report.failed == [] and report.compiled > 0, str(report)
    eagerc.reset_stats()
    for batch in (2, 5):
        x = torch.randn(batch, 3, 8, 8)
        with torch.no_grad():
            assert_close(device_model(x.to("eagerc")).cpu(), model(x))
    assert eagerc.stats()["compiles"] == 0


@pytest.mark.slow
def test_a_second_warm_finds_everything_cached(fresh_cache):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    model = model.to("eagerc")
    x = torch.randn(4, 8).to("eagerc")
    first = eagerc.warm_cache(model, x, workers=0)
    again = eagerc.warm_cache(model, x, workers=1)
    assert first.compiled > 0 and first.failed == []
    assert again.compiled == 0 and again.cached == again.calls and again.failed == []


@pytest.mark.slow
def test_train_warms_backward_and_optimizer_step(fresh_cache):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    model = model.to("eagerc")
    x = torch.randn(5, 8)
    adam = lambda params: torch.optim.Adam(params, lr=1e-2)  # noqa: E731
    report = eagerc.warm_cache(model, x.to("eagerc"), train=True, workers=2, optimizer=adam)
    assert report.failed == [] and report.discovery_stopped is None, str(report)
    eagerc.reset_stats()
    for m, data in ((model, x.to("eagerc")), (reference, x)):
        opt = adam(list(m.parameters()))
        for _ in range(2):
            m(data).float().sum().backward()
            opt.step()
            opt.zero_grad()
    assert eagerc.stats()["compiles"] == 0
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p.detach().cpu(), q.detach())


def test_train_needs_an_output_to_differentiate(fresh_cache):
    model = torch.nn.Linear(4, 4).to("eagerc")
    for p in model.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="train=True"):
        eagerc.warm_cache(model, torch.randn(2, 4).to("eagerc"), train=True, workers=0)


@pytest.mark.slow
def test_override_mode_on_cpu(fresh_cache):
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Softmax(dim=-1))
    x = torch.randn(3, 6)
    report = eagerc.warm_cache(model, x, workers=1)   # the model's device: cpu
    assert report.device == "cpu" and report.compiled > 0
    eagerc.reset_stats()
    with eagerc.enabled("cpu"):
        with torch.no_grad():
            got = model(x)
    assert eagerc.stats()["compiles"] == 0
    with torch.no_grad():
        assert_close(got, model(x))


@pytest.mark.slow
def test_command_line(fresh_cache, tmp_path):
    (tmp_path / "tiny_models.py").write_text(textwrap.dedent("""
        import torch
        def mlp():
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()).to("eagerc")
            return model, (torch.randn(3, 4).to("eagerc"),)
    """))
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    result = subprocess.run([sys.executable, "-m", "eagerc", "warm", "tiny_models:mlp", "--workers", "1"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kernels compiled" in result.stdout
    compiled = int(re.search(r"^  kernels compiled +(\d+)", result.stdout, re.M).group(1))
    # each kernel a worker compiles is shown by the command as it finishes
    assert compiled > 0 and result.stderr.count("eagerc: compiled ") == compiled, result.stderr[-3000:]
    assert re.search(r"^  calls replayed .* \+ 0 failed$", result.stdout, re.M), result.stdout
    bad = subprocess.run([sys.executable, "-m", "eagerc", "warm", "tiny_models"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "MODULE:FACTORY" in bad.stderr + bad.stdout


def test_warming_in_process_compiles_in_background_mode_too(fresh_cache, monkeypatch):
    # Background compilation is the default outside the test suite: warm's own replays and
    # its confirming forward still compile before they answer (an interim answer would
    # report nothing compiled and leave the kernels for later).
    monkeypatch.setenv("EAGERC_COMPILE", "background")
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Softplus()).to("eagerc")
    x = torch.randn(3, 6).to("eagerc")
    report = eagerc.warm_cache(model, x, workers=0, confirm=True)
    assert report.failed == [] and report.compiled > 0, str(report)
    eagerc.reset_stats()
    with torch.no_grad():
        model(x)
    stats = eagerc.stats()
    assert stats["compiles"] == 0 and stats["interim"] == 0, stats
