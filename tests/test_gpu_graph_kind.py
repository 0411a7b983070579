"""Which graphs the Triton code generator takes as GPU graphs (eagerc/codegen/triton.computes_on_gpu).

Runs without a GPU: fake CUDA tensors need no device. A factory (arange, ones) has no tensor
input; it is a GPU graph because of what it makes. Taken for a CPU graph, it got CPU's device
helpers in Inductor's GPU wrapper and never compiled (found on the H100).
"""
from __future__ import annotations

import types

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from eagerc.codegen.triton.generator import computes_on_gpu as _is_gpu_graph


def _traced(fn, *fakes):
    return types.SimpleNamespace(gm=make_fx(fn, tracing_mode="fake")(*fakes), fakes=list(fakes))


@pytest.mark.parametrize("device, gpu", [("cuda", True), ("cpu", False)])
def test_factory_is_a_graph_of_the_device_it_makes_on(device, gpu):
    assert _is_gpu_graph(_traced(lambda: torch.arange(5, device=device))) is gpu
    assert _is_gpu_graph(_traced(lambda: torch.ones(2, 3, dtype=torch.bool, device=device))) is gpu


def test_graph_of_cpu_tensors_is_not_a_gpu_graph():
    assert not _is_gpu_graph(_traced(lambda x: x + 1, torch.ones(3)))
