"""Background compilation leaves the caller's random streams alone: a program seeded with
torch.manual_seed draws the same numbers whether its misses compile now or in the compile
service (eagerc/per_op/background.py, eagerc/random_streams.py).

The service compiles in processes of its own, which cannot touch the caller's generators;
what remains to hold is the caller's side: a random op that compiles (override mode with
the op named, a device without aliases) is not answered in the interim but compiled at its
first call, on the caller's thread, under a save and restore of the streams, while every
other miss is answered in the interim. On the eagerc device random ops run ATen's CPU
kernels on aliases and never wait for a compile."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _C
from eagerc.cache import service
from eagerc.per_op import background
from eagerc.testing import assert_close


@pytest.fixture(scope="module")
def service_cache(tmp_path_factory):
    """One kernel cache for the file's tests, so one compile service serves them (the
    service's folder follows the environment: starting one costs a process that imports
    the compiler); each test starts with nothing in memory."""
    return tmp_path_factory.mktemp("background-streams")


@pytest.fixture
def service_env(service_cache, monkeypatch):
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(service_cache))
    monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
    service().reset()
    _C._clear_tables()
    eagerc.reset_stats()
    yield service_cache
    eagerc.wait_compiles(timeout=900)
    service().reset()
    _C._clear_tables()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def _cpu_draw():
    return torch.rand(6)  # the caller's own stream, never served by eagerc here


def _small_net():
    torch.manual_seed(0)
    return _Net().train(), torch.randn(8, 16), lambda net, x: net(x)


def _program(device, steps=3, build=_small_net):
    """Seeded: a module in train mode (dropout; `build()` gives it, its input and how to
    call it) and random factories and in-place draws on `device`, with a CPU draw after
    each step. Returns every value drawn or computed, on CPU."""
    net, x, forward = build()
    torch.manual_seed(1234)
    net, x = net.to(device), x.to(device)
    values = []
    for _ in range(steps):
        values.append(forward(net, x))
        values.append(torch.rand(40, device=device))
        values.append(torch.randn(40, device=device))
        values.append(torch.full((40,), 0.5, device=device).bernoulli_())
        values.append(F.dropout(torch.ones(40, device=device), 0.25))
        values.append(_cpu_draw())
    return [v.detach().cpu() for v in values]


def _compare(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, msg=f"value {i}")


def test_override_mode_background_draws_are_native_eagers(service_env):
    # Random ops stay native in override mode (ops=None leaves them out); the rest is
    # answered in the interim while the service compiles it.
    eagerc.enable("cpu", compile="background")
    try:
        got = _program("cpu")
        s = eagerc.stats()
    finally:
        eagerc.disable("cpu")
        background.set_mode("cpu", None)
    assert s["interim"] > 0 and s["compiles"] == 0, s
    _compare(got, _program("cpu"))


def test_device_background_draws_follow_the_seed(service_env, build=_small_net, steps=3):
    # On the eagerc device random ops run ATen's CPU kernels on aliases, drawing from the
    # CPU generator: background mode must draw what compile="now" draws, and what CPU
    # eager draws, at every step.
    eagerc.enable("eagerc", compile="background")
    try:
        got = _program("eagerc", build=build, steps=steps)
        s = eagerc.stats()
        assert s["interim"] > 0, s
        # No random op waits for a compile or is answered in the interim.
        for op in ("aten::native_dropout", "aten::normal_", "aten::uniform_", "aten::bernoulli_.float"):
            per_op = s["ops"][f"{op}@PrivateUse1"]
            assert per_op["interim"] == 0 and per_op["compiles"] == 0 and per_op["aliased"] > 0, (op, per_op)
        background.set_mode("eagerc", "now")
        _C._clear_tables()
        want = _program("eagerc", build=build, steps=steps)
    finally:
        background.set_mode("eagerc", None)
    _compare(got, want)
    _compare(got, _program("cpu", build=build, steps=steps))


@pytest.mark.slow
def test_device_background_bert_training_follows_the_seed(service_env, tiny_bert):
    # transformers' BERT in train mode: dropout after embeddings, attention and each layer.
    def build():
        ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(3))
        return tiny_bert().train(), ids, lambda net, x: net(x).last_hidden_state

    test_device_background_draws_follow_the_seed(service_env, build=build, steps=2)


def test_autotuning_example_values_off_the_owning_thread():
    # Inductor's compile-time autotuning (GPU targets) draws its example inputs from the
    # process's generators under a save and restore; on the background thread they come
    # from a private generator, the same sizes and strides, and nothing is saved.
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    from eagerc import random_streams

    made, errors = {}, []

    def background_thread():
        try:
            with random_streams.elsewhere():
                before = torch.random.default_generator.get_state()
                made["float"] = AlgorithmSelectorCache.generate_example_value(
                    (3, 4), (1, 3), "cpu", torch.float32, 0)
                made["padded"] = AlgorithmSelectorCache.generate_example_value(
                    (2, 5), (6, 1), "cpu", torch.float16, 2, (2, 6))
                made["int"] = AlgorithmSelectorCache.generate_example_value(
                    (7,), (2,), "cpu", torch.int64, 0)
                made["untouched"] = torch.equal(torch.random.default_generator.get_state(), before)
                with pytest.raises(RuntimeError, match="does not own the random streams"):
                    with random_streams.kept():
                        pass
        except BaseException as e:  # noqa: BLE001 - reported on the test's thread
            errors.append(e)

    saved = []
    get_rng_state = torch.random.get_rng_state
    try:
        torch.random.get_rng_state = lambda: saved.append(1) or get_rng_state()
        thread = threading.Thread(target=background_thread)
        thread.start()
        thread.join()
    finally:
        torch.random.get_rng_state = get_rng_state
    assert not errors, errors
    assert made["untouched"] and not saved
    for name, size, stride, dtype, extent in (("float", (3, 4), (1, 3), torch.float32, 12),
                                              ("padded", (2, 5), (6, 1), torch.float16, 14),
                                              ("int", (7,), (2,), torch.int64, 13)):
        t = made[name]
        assert (t.shape, t.stride(), t.dtype) == (size, stride, dtype), name
        assert t.untyped_storage().nbytes() == extent * t.element_size(), name
    assert made["float"].std() > 0.5 and torch.isfinite(made["float"]).all()
    assert not made["int"].any()
    # On the caller's thread it is Inductor's own (which keeps the caller's stream).
    before = torch.random.get_rng_state()
    value = AlgorithmSelectorCache.generate_example_value((3, 4), (4, 1), "cpu", torch.float32, 0)
    assert value.shape == (3, 4) and torch.equal(torch.random.get_rng_state(), before)
