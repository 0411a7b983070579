"""LSTM and GRU cells on the eagerc device equal CPU eager, forward and backward.

On a CUDA or PrivateUse1 tensor ATen's lstm_cell/gru_cell (and nn.LSTM/nn.GRU, whose layers
call them) take the fused ops _thnn_fused_lstm_cell/_thnn_fused_gru_cell and their
backwards, which only CUDA has kernels for; CPU eager computes the unfused math. The device
serves them with eagerc's decompositions (eagerc/compile/accelerator/rnn_cells.py), compiled
at the miss in both compile modes, since no kernel could serve them meanwhile.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import eagerc
from eagerc import _C
from eagerc.cache import service
from eagerc.per_op import background
from eagerc.testing import assert_close

FUSED = ("aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl",
         "aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward")


def _twin(cls, *args, **kwargs):
    torch.manual_seed(0)
    cpu = cls(*args, **kwargs)
    torch.manual_seed(0)
    device = cls(*args, **kwargs).to("eagerc")
    device.load_state_dict(cpu.state_dict())
    return cpu, device


def _outputs(result) -> tuple:
    """A module's tensors: LSTMCell's (h, c), GRUCell's h, LSTM's (out, (h, c)), GRU's (out, h)."""
    if isinstance(result, torch.Tensor):
        return (result,)
    return tuple(t for r in result for t in _outputs(r))


def _forward_backward(module, inputs):
    """The module's outputs and the gradients of a weighted sum of them w.r.t. the inputs
    and parameters (each output weighted differently, so each one's gradient counts)."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    outs = _outputs(module(*inputs))
    loss = sum((o * torch.linspace(-1, 1, o.numel(), device=o.device).view(o.shape) * (i + 1)).sum()
               for i, o in enumerate(outs))
    loss.backward()
    grads = [x.grad for x in inputs] + [p.grad for p in module.parameters()]
    return [o.detach().cpu() for o in outs], [g.cpu() for g in grads]


def _compare(cls, args, kwargs, inputs, model=False):
    cpu, device = _twin(cls, *args, **kwargs)
    expected, expected_grads = _forward_backward(cpu, inputs)
    actual, actual_grads = _forward_backward(device, [x.to("eagerc") for x in inputs])
    assert all(t.device.type == "cpu" for t in actual)
    assert_close(actual, expected, model=model)
    assert_close(actual_grads, expected_grads, model=model)


def _served_compiled(names) -> None:
    ops = eagerc.stats()["ops"]
    for name in names:
        entry = ops.get(f"{name}@PrivateUse1")
        assert entry is not None, sorted(ops)
        assert entry["kernels"] >= 1 and not entry["fallbacks"] and not entry["interim"], entry


@pytest.fixture(scope="module")
def mode_caches(tmp_path_factory):
    """A kernel cache per compile mode, shared by this file's tests in that mode: a
    signature misses, and compiles in that mode, at its first call; a later test that
    calls it again loads the kernel from disk instead of compiling it once more."""
    return {mode: tmp_path_factory.mktemp(f"rnn-cells-{mode}") for mode in ("now", "background")}


@pytest.fixture(params=["now", "background"])
def compile_mode(request, mode_caches, monkeypatch):
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(mode_caches[request.param]))
    service().reset()
    _C._clear_tables()  # nothing in memory: each test's first calls miss
    eagerc.reset_stats()
    if request.param == "background":
        monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
        background.set_mode("eagerc", "background")
    yield request.param
    background.set_mode("eagerc", None)
    service().reset()
    _C._clear_tables()


def _cell_run(cell, inputs):
    """An LSTMCell (state (h, c)) or GRUCell (state h) over `inputs` = [x, h(, c)] for two
    steps (the second from the first's state), then backward through both."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    x, state = inputs[0], tuple(inputs[1:])
    outs = []
    for _ in range(2):
        state = cell(x, state if len(state) > 1 else state[0])
        state = state if isinstance(state, tuple) else (state,)
        outs.extend(state)
    loss = sum((o * (i + 1)).sum() + (o * o).sum() for i, o in enumerate(outs))
    loss.backward()
    return ([o.detach().cpu() for o in outs],
            [t.grad.cpu() for t in inputs] + [p.grad.cpu() for p in cell.parameters()])


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell], ids=["lstm", "gru"])
def test_cell_forward_and_backward(compile_mode, cls, bias, batched):
    torch.manual_seed(1)
    batch = (3,) if batched else ()
    inputs = [torch.randn(*batch, 5)] + [torch.randn(*batch, 4)
                                         for _ in range(2 if cls is torch.nn.LSTMCell else 1)]
    cpu, device = _twin(cls, 5, 4, bias=bias)
    expected, expected_grads = _cell_run(cpu, inputs)
    actual, actual_grads = _cell_run(device, [x.to("eagerc") for x in inputs])
    assert_close(actual, expected)
    assert_close(actual_grads, expected_grads)
    _served_compiled(FUSED[:2] if cls is torch.nn.LSTMCell else FUSED[2:])


@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell], ids=["lstm", "gru"])
def test_cell_without_state(compile_mode, cls):
    """No state given: the cell starts from zeros, and only the input has a gradient."""
    _compare(cls, (5, 4), {}, [torch.randn(2, 5)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_lstm_cell_other_dtypes(dtype):
    """Half types compute in float32 (CUDA's accumulate type) and round where CUDA stores:
    within a half type's tolerance of CPU's unfused math."""
    torch.manual_seed(2)
    inputs = [torch.randn(3, 5, dtype=dtype), torch.randn(3, 4, dtype=dtype), torch.randn(3, 4, dtype=dtype)]
    cpu, device = _twin(torch.nn.LSTMCell, 5, 4, dtype=dtype)
    expected, expected_grads = _cell_run(cpu, inputs)
    actual, actual_grads = _cell_run(device, [x.to("eagerc") for x in inputs])
    model = dtype in (torch.float16, torch.bfloat16)  # rounded at other steps than CPU's
    assert_close(actual, expected, model=model)
    assert_close(actual_grads, expected_grads, model=model)


def test_cell_size_checks_are_atens():
    """Mismatched sizes raise as ATen's CUDA kernel's checks do."""
    gates = torch.randn(2, 16).to("eagerc")
    with pytest.raises(RuntimeError, match="prev_hidden"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.randn(2, 5).to("eagerc"))
    with pytest.raises(RuntimeError, match="hidden_gates"):
        torch.ops.aten._thnn_fused_gru_cell(gates[:, :12], gates, torch.randn(2, 4).to("eagerc"))


@pytest.mark.parametrize("kwargs", [dict(num_layers=2), dict(num_layers=2, batch_first=True, bidirectional=True),
                                    dict(bias=False)], ids=["two_layers", "batch_first_bidirectional", "no_bias"])
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_recurrent_layers(cls, kwargs):
    """nn.LSTM and nn.GRU run their layers through the same fused cells."""
    torch.manual_seed(3)
    _compare(cls, (3, 4), kwargs, [torch.randn(5, 2, 3)])
    _served_compiled(FUSED[:2] if cls is torch.nn.LSTM else FUSED[2:])


_VENDOR = """
import torch, eagerc
from eagerc.testing import assert_close
torch.manual_seed(0)
for cls in (torch.nn.LSTMCell, torch.nn.GRUCell):
    cpu = cls(3, 4)
    dev = cls(3, 4).to("eagerc")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 3)
    xd = x.to("eagerc").requires_grad_()
    x.requires_grad_()
    out, outd = cpu(x), dev(xd)
    out = out if isinstance(out, tuple) else (out,)
    outd = outd if isinstance(outd, tuple) else (outd,)
    assert_close([o.detach().cpu() for o in outd], [o.detach() for o in out])
    sum(o.sum() * (i + 1) for i, o in enumerate(out)).backward()
    sum(o.sum() * (i + 1) for i, o in enumerate(outd)).backward()
    assert_close(xd.grad.cpu(), x.grad)
    assert_close([p.grad.cpu() for p in dev.parameters()], [p.grad for p in cpu.parameters()])
ops = eagerc.stats()["ops"]
fused = {k: v for k, v in ops.items() if "_thnn_fused" in k}
assert len(fused) == 4 and all(v["compiles"] + v["disk_loads"] and not v["fallbacks"] for v in fused.values()), fused
print("OK")
"""


@pytest.mark.slow
def test_served_without_aliases_or_host(fresh_cache):
    """A vendor's view (aliases off, no host round trip): the accelerator decompositions
    serve the cells all the same."""
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_CPU_FALLBACK="0", EAGERC_COMPILE="now",
               OMP_NUM_THREADS="1", EAGERC_CACHE_DIR=str(fresh_cache))
    proc = subprocess.run([sys.executable, "-c", _VENDOR], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
