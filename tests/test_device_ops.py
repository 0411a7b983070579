"""Op families on the eagerc device beyond pointwise math: scatter, sort/topk, cumulative
ops, pooling, index_put, and a data-dependent-shape op (run on zero-copy aliases)."""
from __future__ import annotations

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

CASES = {
    "scatter_add": lambda a, i: torch.zeros(6, 8, device=a.device).scatter_add(1, i, a[:, :3]),
    "sort": lambda a, i: torch.sort(a, dim=1)[0],
    "topk": lambda a, i: torch.topk(a, 3, dim=1)[0],
    "cumsum": lambda a, i: torch.cumsum(a, dim=1),
    "max_pool2d": lambda a, i: torch.nn.functional.max_pool2d(a.view(1, 1, 6, 8), 2),
    "index_put": lambda a, i: a.clone().index_put_((torch.tensor([0, 2], device=a.device),),
                                                   torch.ones(2, 8, device=a.device)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_family_matches_cpu(name):
    torch.manual_seed(0)
    x, idx = torch.randn(6, 8), torch.randint(0, 8, (6, 3))
    eagerc.reset_stats()
    out = CASES[name](x.to("eagerc"), idx.to("eagerc"))
    assert out.device.type == "eagerc"
    assert_close(out.cpu(), CASES[name](x, idx))
    assert eagerc.stats()["fallbacks"] == 0


def test_data_dependent_shape_runs_on_aliases():
    x = torch.randn(6, 8)
    eagerc.reset_stats()
    out = torch.nonzero(x.to("eagerc") > 0)
    assert out.device.type == "eagerc"
    assert torch.equal(out.cpu(), torch.nonzero(x > 0))
    s = eagerc.stats()
    assert s["aliased"] == 1 and s["fallbacks"] == 0
