"""Generators of the eagerc device (csrc/device/hooks.cpp, eagerc/device/device_module.py).

A device generator keeps its state in a generator of the memory's home (a CPU mt19937 one
on host memory): a random op called with it runs the home's eager kernel on aliases with
that home generator, so ``torch.Generator("eagerc").manual_seed(s)`` gives exactly the
numbers a CPU generator seeded s gives on CPU. The device's default generator is the
home's default generator, and a random op called without a generator runs the home's
eager kernel on aliases too (not compiled: Inductor's C++ draws element by element, 3-15x
slower than ATen's CPU kernels), so torch.manual_seed(s) gives CPU eager's numbers.
"""
from __future__ import annotations

import pytest
import torch

import eagerc
from eagerc import random_streams

DEV = "eagerc"
PROBS = [[0.1, 0.5, 0.2, 0.2], [0.3, 0.3, 0.3, 0.1]]

# Each random op called with generator `g` on device `d` (the same call on either device).
RANDOM_CALLS = {
    "rand": lambda d, g: torch.rand(3, 4, generator=g, device=d),
    "randn": lambda d, g: torch.randn(3, 4, generator=g, device=d),
    "randn_float64": lambda d, g: torch.randn(5, generator=g, device=d, dtype=torch.float64),
    "randint": lambda d, g: torch.randint(10, (3, 4), generator=g, device=d),
    "randint_low": lambda d, g: torch.randint(3, 10, (3, 4), generator=g, device=d),
    "randperm": lambda d, g: torch.randperm(20, generator=g, device=d),
    "rand_like": lambda d, g: torch.rand_like(torch.empty(6, device=d), generator=g),
    "randn_like": lambda d, g: torch.randn_like(torch.empty(6, device=d), generator=g),
    "normal_tensor_tensor": lambda d, g: torch.normal(torch.arange(4.0, device=d),
                                                      torch.full((4,), 2.0, device=d), generator=g),
    "normal_tensor_float": lambda d, g: torch.normal(torch.arange(4.0, device=d), 2.0, generator=g),
    "normal_float_tensor": lambda d, g: torch.normal(1.0, torch.full((4,), 2.0, device=d), generator=g),
    "normal_float_float": lambda d, g: torch.normal(1.0, 2.0, (4,), generator=g, device=d),
    "normal_out": lambda d, g: torch.normal(torch.zeros(4, device=d), torch.ones(4, device=d),
                                            generator=g, out=torch.empty(4, device=d)),
    "normal_": lambda d, g: torch.empty(6, device=d).normal_(1.0, 3.0, generator=g),
    "uniform_": lambda d, g: torch.empty(6, device=d).uniform_(-2, 2, generator=g),
    "bernoulli": lambda d, g: torch.bernoulli(torch.full((16,), 0.5, device=d), generator=g),
    "bernoulli_p": lambda d, g: torch.bernoulli(torch.empty(16, device=d), 0.3, generator=g),
    "bernoulli_float_": lambda d, g: torch.empty(16, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_tensor_": lambda d, g: torch.empty(16, device=d).bernoulli_(
        torch.full((16,), 0.5, device=d), generator=g),
    "multinomial": lambda d, g: torch.multinomial(torch.tensor(PROBS, device=d), 2, generator=g),
    "multinomial_replacement": lambda d, g: torch.multinomial(torch.tensor(PROBS, device=d), 8,
                                                              replacement=True, generator=g),
    "exponential_": lambda d, g: torch.empty(6, device=d).exponential_(2.0, generator=g),
    "geometric_": lambda d, g: torch.empty(6, device=d).geometric_(0.3, generator=g),
    "cauchy_": lambda d, g: torch.empty(6, device=d).cauchy_(generator=g),
    "log_normal_": lambda d, g: torch.empty(6, device=d).log_normal_(generator=g),
    "random_": lambda d, g: torch.empty(6, device=d).random_(generator=g),
    "random_to": lambda d, g: torch.empty(6, device=d).random_(10, generator=g),
    "random_from_to": lambda d, g: torch.empty(6, device=d).random_(3, 10, generator=g),
}


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
def test_device_generator_gives_cpu_eagers_numbers(name):
    call = RANDOM_CALLS[name]
    device_gen = torch.Generator(device=DEV).manual_seed(0)
    cpu_gen = torch.Generator().manual_seed(0)
    first = call(DEV, device_gen)
    assert first.device == torch.device(DEV, 0)
    torch.testing.assert_close(first.cpu(), call("cpu", cpu_gen), rtol=0, atol=0)
    # The device generator advanced exactly as the CPU one did: the next draw matches too.
    assert torch.equal(device_gen.get_state(), cpu_gen.get_state())
    torch.testing.assert_close(call(DEV, device_gen).cpu(), call("cpu", cpu_gen), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
def test_default_stream_gives_cpu_eagers_numbers_by_atens_kernel(name):
    call = RANDOM_CALLS[name]
    eagerc.reset_stats()
    torch.manual_seed(0)
    first, second = call(DEV, None), call(DEV, None)
    torch.manual_seed(0)
    torch.testing.assert_close(first.cpu(), call("cpu", None), rtol=0, atol=0)
    torch.testing.assert_close(second.cpu(), call("cpu", None), rtol=0, atol=0)
    # ATen's CPU kernel drew them on aliases: no random op reached a compiled kernel.
    ops = eagerc.stats()["ops"]
    assert sum(s["aliased"] for s in ops.values()) >= 2, ops
    compiled = [n for n, s in ops.items() if (s["hits"] or s["misses"]) and _draws(n)]
    assert not compiled, {n: ops[n] for n in compiled}


def _draws(stats_name):
    """Whether the op of a stats entry ("aten::normal_@PrivateUse1") is a random op."""
    name, _, overload = stats_name.split("@")[0].removeprefix("aten::").partition(".")
    return random_streams.draws(getattr(getattr(torch.ops.aten, name), overload or "default"))


def test_training_dropout_draws_cpu_eagers_mask_by_atens_kernel():
    # The common path: dropout in train mode reaches native_dropout on the device (ATen's
    # fused-kernel branch for PrivateUse1), whose CPU kernel draws bernoulli_ as CPU
    # eager's dropout does.
    x = torch.randn(64, 64)
    eagerc.reset_stats()
    torch.manual_seed(3)
    got = [torch.nn.functional.dropout(x.to(DEV), 0.1, training=True).cpu() for _ in range(2)]
    torch.manual_seed(3)
    want = [torch.nn.functional.dropout(x, 0.1, training=True) for _ in range(2)]
    for g, w in zip(got, want):
        assert torch.equal(g == 0, w == 0)
        torch.testing.assert_close(g, w)
    dropout = eagerc.stats()["ops"]["aten::native_dropout@PrivateUse1"]
    assert dropout["aliased"] == 2 and dropout["kernels"] == 0 and dropout["hits"] == 0, dropout


@pytest.mark.parametrize("name", ["randn", "randint", "randperm", "bernoulli_p", "multinomial",
                                  "exponential_", "normal_float_tensor"])
def test_same_seed_same_numbers_other_seed_other_numbers(name):
    call = RANDOM_CALLS[name]
    first = call(DEV, torch.Generator(DEV).manual_seed(5)).cpu()
    assert torch.equal(call(DEV, torch.Generator(DEV).manual_seed(5)).cpu(), first)
    assert not torch.equal(call(DEV, torch.Generator(DEV).manual_seed(6)).cpu(), first)


def test_state_round_trip_replays_the_draws():
    g = torch.Generator(DEV).manual_seed(3)
    assert g.device == torch.device(DEV, 0) and g.initial_seed() == 3
    state = g.get_state()
    # The home's (CPU mt19937) state format: the state a CPU generator of that seed has.
    assert state.dtype == torch.uint8 and torch.equal(state, torch.Generator().manual_seed(3).get_state())
    first = torch.randn(8, generator=g, device=DEV).cpu()
    assert not torch.equal(g.get_state(), state)
    g.set_state(state)
    assert torch.equal(torch.randn(8, generator=g, device=DEV).cpu(), first)
    with pytest.raises(RuntimeError):
        g.set_state(state[:-1])


@pytest.mark.parametrize("copy", ["clone_state", "deepcopy"])
def test_a_copy_has_the_state_then_draws_apart(copy):
    g = torch.Generator(DEV).manual_seed(11)
    torch.rand(3, generator=g, device=DEV)
    twin = g.clone_state() if copy == "clone_state" else __import__("copy").deepcopy(g)
    assert twin.device == torch.device(DEV, 0) and torch.equal(twin.get_state(), g.get_state())
    a = torch.rand(5, generator=g, device=DEV).cpu()
    assert torch.equal(torch.rand(5, generator=twin, device=DEV).cpu(), a)
    torch.rand(5, generator=twin, device=DEV)  # the twin moves on, g does not
    assert not torch.equal(twin.get_state(), g.get_state())


def test_seed_picks_a_fresh_seed():
    g = torch.Generator(DEV)
    assert g.initial_seed() == torch.Generator().initial_seed()  # the CPU's default seed
    chosen = g.seed()
    assert g.initial_seed() == chosen
    again = torch.Generator(DEV).manual_seed(chosen)
    assert torch.equal(torch.rand(4, generator=g, device=DEV).cpu(),
                       torch.rand(4, generator=again, device=DEV).cpu())


def test_an_explicit_generator_leaves_the_default_stream():
    # A random op called without a generator draws from the default generator; a call
    # with a device generator draws from that one only.
    torch.manual_seed(0)
    torch.randn(4, device=DEV)
    torch.manual_seed(0)
    want = torch.randn(4, device=DEV).cpu()
    torch.manual_seed(0)
    torch.randn(100, generator=torch.Generator(DEV).manual_seed(1), device=DEV)
    assert torch.equal(torch.randn(4, device=DEV).cpu(), want)


def test_default_generators_are_the_ones_random_ops_draw_from():
    (default,) = torch.eagerc.default_generators
    assert default.device == torch.device(DEV, 0)
    torch.manual_seed(9)  # reaches the device's default generator
    assert default.initial_seed() == 9 == torch.eagerc.initial_seed()
    x = torch.ones(64, device=DEV)
    calls = {"randn": lambda: torch.randn(64, device=DEV),
             "dropout": lambda: torch.nn.functional.dropout(x, 0.5, training=True),
             "bernoulli": lambda: torch.bernoulli(x * 0.5)}
    for name, call in calls.items():
        default.manual_seed(4)
        first = call().cpu()
        other = call().cpu()
        default.manual_seed(4)
        assert torch.equal(call().cpu(), first), name
        assert not torch.equal(other, first), name
        # get_state/set_state of the default generator replay the device's draws.
        state = default.get_state()
        drawn = call().cpu()
        default.set_state(state)
        assert torch.equal(call().cpu(), drawn), name
        torch.eagerc.set_rng_state(state)
        assert torch.equal(call().cpu(), drawn), name
    # Passing the default generator explicitly draws from the same stream as passing none.
    default.manual_seed(2)
    explicit = torch.rand(5, generator=default, device=DEV).cpu()
    assert torch.equal(explicit, torch.rand(5, generator=torch.Generator().manual_seed(2)))


def test_rng_state_is_the_default_generators():
    torch.eagerc.manual_seed(1)
    state = torch.eagerc.get_rng_state()
    assert torch.equal(state, torch.eagerc.default_generators[0].get_state())
    with pytest.raises(RuntimeError, match="expected a state of"):
        torch.eagerc.set_rng_state(state[:-1])


def test_a_cpu_call_with_a_device_generator_draws_from_it():
    # The generator dispatches the call to the device, whose fallback hands the CPU kernel
    # the generator's home (a CPU generator on host memory): the CPU tensor is filled from
    # the device generator's stream (on GPU memory, CUDA's, the CPU kernel refuses it).
    g = torch.Generator(DEV).manual_seed(2)
    got = torch.empty(3).uniform_(generator=g)
    assert got.device.type == "cpu"
    assert torch.equal(got, torch.empty(3).uniform_(generator=torch.Generator().manual_seed(2)))


def test_host_round_trip_hands_the_cpu_kernel_the_generators_state(tmp_path):
    # With aliases off the CPU kernel runs on copies (the host round trip): it too gets
    # the CPU generator that holds the device generator's state.
    import os
    import subprocess
    import sys

    script = """
import torch, eagerc
for op in ("uniform_", "exponential_", "normal_"):
    mine, cpu = torch.Generator("eagerc").manual_seed(3), torch.Generator().manual_seed(3)
    got = getattr(torch.zeros(5).to("eagerc"), op)(generator=mine).cpu()
    assert torch.equal(got, getattr(torch.zeros(5), op)(generator=cpu)), op
    assert torch.equal(mine.get_state(), cpu.get_state()), op
assert eagerc.stats()["host_round_trips"] == 3, eagerc.stats()
print("OK")
"""
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


def tiny_ddpm_pipeline():
    """A diffusers DDPMPipeline over a tiny UNet (random weights, seed 0; nothing downloaded),
    on the CPU (the GPU-memory test builds the same one)."""
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, block_out_channels=(8, 16),
                       layers_per_block=1, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4).eval()
    pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10))
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.mark.slow
def test_ddpm_pipeline_with_a_device_generator_matches_cpu():
    """diffusers passes the pipeline's generator to every draw (the initial noise and each
    step's variance): with a device generator of seed 0 the device gives the images the
    CPU gives with a CPU generator of seed 0 (the UNet's compiled kernels within float
    tolerance)."""
    pytest.importorskip("diffusers")
    from eagerc.testing import assert_close

    pipe = tiny_ddpm_pipeline()

    def images(generator):
        out = pipe(batch_size=2, generator=generator, num_inference_steps=3, output_type="pt")
        return out.images.cpu()

    want = images(torch.Generator().manual_seed(0))
    pipe.to(DEV)
    got = images(torch.Generator(DEV).manual_seed(0))
    assert_close(got, want, model=True)
    assert torch.equal(images(torch.Generator(DEV).manual_seed(0)), got)
    assert (images(torch.Generator(DEV).manual_seed(1)) - got).abs().max() > 0.1
