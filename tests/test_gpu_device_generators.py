"""Generators of the eagerc device on GPU memory (EAGERC_BACKING=cuda): CUDA's semantics.

eagerc:N's generators keep their state in a cuda:N generator (csrc/device/hooks.cpp): a
random op called with one runs CUDA's kernel on aliases with that CUDA generator, so
``torch.Generator("eagerc").manual_seed(s)`` gives the numbers ``torch.Generator("cuda")``
seeded s gives on CUDA, and its state, seed and offset are a CUDA generator's (Philox seed
and offset). The default generator of eagerc:N is cuda:N's, which the device's compiled
random ops draw their seeds from. The host-memory counterpart is
tests/test_device_generators.py (whose table of random calls this file reuses).

The backing is chosen at import, so each test runs a fresh process. Skipped where torch
sees no CUDA GPU.
"""
from __future__ import annotations


import pytest
import torch
from gpu_device_runner import run_on_gpu_device

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_device_generator_gives_cudas_numbers_for_every_random_op(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        from test_device_generators import RANDOM_CALLS
        for name, call in sorted(RANDOM_CALLS.items()):
            mine, cuda = torch.Generator("eagerc").manual_seed(0), torch.Generator("cuda").manual_seed(0)
            got = call("eagerc", mine)
            assert got.device == torch.device("eagerc", 0), (name, got.device)
            assert torch.equal(got.cpu(), call("cuda", cuda).cpu()), name
            # advanced as CUDA's generator (Philox offset): the next draw matches too
            assert torch.equal(mine.get_state(), cuda.get_state()), name
            assert torch.equal(call("eagerc", mine).cpu(), call("cuda", cuda).cpu()), name
            if name in ("randn", "randint", "randperm", "multinomial", "exponential_"):
                other = call("eagerc", torch.Generator("eagerc").manual_seed(1)).cpu()
                assert not torch.equal(other, got.cpu()), name
        s = eagerc.stats()
        reasons = s["ops"]["aten::uniform_@PrivateUse1"]["fallback_reasons"]
        assert reasons.get("an explicit Generator argument"), s["ops"]["aten::uniform_@PrivateUse1"]
        print("OK", len(RANDOM_CALLS))
    """, tmp_path / "cache")
    assert "OK" in out


def test_device_generator_state_is_a_cuda_generators(tmp_path):
    out = run_on_gpu_device("""
        import copy, torch, eagerc
        g = torch.Generator("eagerc").manual_seed(7)
        cuda = torch.Generator("cuda").manual_seed(7)
        assert g.device == torch.device("eagerc", 0) and g.initial_seed() == 7
        assert torch.equal(g.get_state(), cuda.get_state())  # Philox seed and offset
        g.set_offset(8); cuda.set_offset(8)
        assert g.get_offset() == 8
        assert torch.equal(torch.randn(5, generator=g, device="eagerc").cpu(),
                           torch.randn(5, generator=cuda, device="cuda").cpu())
        state = g.get_state()
        first = torch.rand(6, generator=g, device="eagerc").cpu()
        g.set_state(state)
        assert torch.equal(torch.rand(6, generator=g, device="eagerc").cpu(), first)
        for twin in (g.clone_state(), copy.deepcopy(g)):
            assert twin.device == g.device and torch.equal(twin.get_state(), g.get_state())
        # The default generator of eagerc:N is cuda:N's: one state, seeded either way.
        default = torch.eagerc.default_generators[0]
        default.manual_seed(21)
        assert torch.cuda.default_generators[0].initial_seed() == 21
        torch.cuda.manual_seed(22)
        assert torch.eagerc.initial_seed() == 22
        assert torch.equal(torch.eagerc.get_rng_state(), torch.cuda.get_rng_state(0))
        # Compiled random ops (no generator) draw from it: its state replays them.
        x = torch.ones(4096, device="eagerc")
        for call in (lambda: torch.randn(4096, device="eagerc"),
                     lambda: torch.nn.functional.dropout(x, 0.5, training=True)):
            call()
            state = default.get_state()
            drawn = call().cpu()
            default.set_state(state)
            assert torch.equal(call().cpu(), drawn)
        assert eagerc.stats()["ops"]["aten::randn@PrivateUse1"]["kernels"] >= 1
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_ddpm_pipeline_with_a_device_generator_matches_cuda(tmp_path):
    pytest.importorskip("diffusers")
    out = run_on_gpu_device("""
        import torch, eagerc
        from eagerc.testing import assert_close
        from test_device_generators import tiny_ddpm_pipeline
        pipe = tiny_ddpm_pipeline()

        def images(device):
            pipe.to(device)
            out = pipe(batch_size=2, generator=torch.Generator(device).manual_seed(0),
                       num_inference_steps=3, output_type="pt")
            return out.images.cpu()

        want = images("cuda")
        got = images("eagerc")
        assert_close(got, want, model=True)
        assert torch.equal(images("eagerc"), got)
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
