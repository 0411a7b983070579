"""torch.compile of device graphs compiled for the memory's home and run on aliases
(eagerc/device/compile_on_home.py): what GPU memory takes (Triton for CUDA), exercised
here on host memory, where the home is the CPU. Results, gradients, input mutations,
factories inside the graph and dynamic shapes match CPU eager; graphs without device
tensors are left to Inductor as they are."""
from __future__ import annotations

import pytest
import torch

import eagerc  # noqa: F401  (registers the device)
from eagerc import _config
from eagerc.device import compile_on_home
from eagerc.testing import assert_close

pytestmark = pytest.mark.skipif(_config.device_backing() != "cpu",
                                reason="the home path on host memory (GPU memory: tests/test_gpu_device.py)")


@pytest.fixture
def on_home(monkeypatch):
    torch._dynamo.reset()
    compile_on_home.install()
    calls = []
    original = compile_on_home._home_graph

    def counted(*args):
        calls.append(args[2])
        return original(*args)

    monkeypatch.setattr(compile_on_home, "_home_graph", counted)
    yield calls
    compile_on_home.uninstall()
    torch._dynamo.reset()


def _pair(factory):
    torch.manual_seed(0)
    model, device_model = factory(), factory().to("eagerc")
    device_model.load_state_dict(model.state_dict())
    return model, device_model


@pytest.mark.slow  # torch.compile of a training step: 56 s on a busy 2-core machine
def test_a_module_trains_with_graphs_compiled_for_the_home(on_home):
    model, device_model = _pair(lambda: torch.nn.Sequential(
        torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)))
    compiled = torch.compile(device_model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    device_opt = torch.optim.SGD(device_model.parameters(), lr=0.1)
    x = torch.randn(6, 12)
    for _ in range(2):
        for m, o, inp in ((model, opt, x), (compiled, device_opt, x.to("eagerc"))):
            o.zero_grad()
            out = m(inp)
            out.pow(2).mean().backward()
            o.step()
        assert out.device.type == "eagerc"
    for p, q in zip(model.parameters(), device_model.parameters()):
        assert q.device.type == "eagerc" and q.grad.device.type == "eagerc"
        assert_close(q.detach().cpu(), p.detach())
    # A forward and a backward graph, each re-traced for the home.
    assert len(on_home) == 2 and all(str(d) == "eagerc:0" for d in on_home)


def test_input_mutation_factories_and_views(on_home):
    def f(x, buf):
        buf.add_(1)                                    # an input mutated in place
        y = torch.sin(x) + torch.ones(x.shape, device=x.device)
        return y, y.t(), buf * 2                       # a view of an output

    x, buf = torch.randn(5, 3), torch.zeros(5, 3)
    dx, dbuf = x.to("eagerc"), buf.to("eagerc")
    want = f(x, buf)
    got = torch.compile(f)(dx, dbuf)
    for g, w in zip(got, want):
        assert g.device.type == "eagerc"
        assert_close(g.cpu(), w)
    assert_close(dbuf.cpu(), buf)
    assert got[1]._base is got[0] or got[1].untyped_storage().data_ptr() == got[0].untyped_storage().data_ptr()


def test_new_sizes_run_through_one_dynamic_graph(on_home):
    f = torch.compile(lambda x: torch.softmax(x * 2, -1).sum(0))
    for n in (3, 7, 11):
        x = torch.randn(n, 9)
        assert_close(f(x.to("eagerc")).cpu(), torch.softmax(x * 2, -1).sum(0))
    # The first size, then one graph with a symbolic size for the rest.
    assert len(on_home) == 2


def test_graphs_without_device_tensors_are_not_touched(on_home):
    x = torch.randn(4, 4)
    assert_close(torch.compile(lambda t: t.cos() + 1)(x), x.cos() + 1)
    assert on_home == []
