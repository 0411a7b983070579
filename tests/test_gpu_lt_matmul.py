"""mm and addmm hits on CUDA as one direct cuBLASLt call (the plan launcher's lt_matmul.cpp),
against native CUDA: the layouts nn.Linear and users pass, a row bias and its expansion,
alpha, TF32 allowed or not, odd and one-row sizes, and the calls left to ATen's shim
(beta other than 1, a full self, float64, an empty inner dimension).

Skipped where torch sees no CUDA GPU (CI); run on the GPU machine by tools/gpu_check.sh.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc.testing import assert_close

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DEV = "cuda"
OPS = ["aten::mm", "aten::addmm"]


def _calls():
    g = torch.Generator(device=DEV).manual_seed(0)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=DEV, generator=g, dtype=dtype)

    w, b = r(768, 768), r(768)
    return {
        "linear (addmm, weight transposed)": lambda: F.linear(r(128, 768), w, b),
        "linear, one row": lambda: F.linear(r(1, 768), w, b),
        "addmm expanded bias, alpha": lambda: torch.addmm(b[:96].expand(37, 96), r(37, 91), r(91, 96), alpha=2.0),
        "addmm odd sizes": lambda: torch.addmm(r(13), r(37, 91), r(13, 91).t()),
        "mm row-major": lambda: torch.mm(r(64, 64), r(64, 64)),
        "mm both transposed": lambda: torch.mm(r(91, 37).t(), r(13, 91).t()),
        "mm padded rows": lambda: torch.mm(r(50, 128)[:, :100], r(100, 120)[:, :77]),
        "shim: beta 0.5": lambda: torch.addmm(r(96), r(37, 91), r(91, 96), beta=0.5),
        "shim: full self": lambda: torch.addmm(r(37, 96), r(37, 91), r(91, 96)),
        "shim: float64": lambda: torch.mm(r(17, 9, dtype=torch.float64), r(9, 5, dtype=torch.float64)),
        "shim: empty inner": lambda: torch.addmm(r(5), r(3, 0), r(0, 5)),
    }


CASES = ["linear (addmm, weight transposed)", "linear, one row", "addmm expanded bias, alpha", "addmm odd sizes",
         "mm row-major", "mm both transposed", "mm padded rows", "shim: beta 0.5", "shim: full self",
         "shim: float64", "shim: empty inner"]


@pytest.mark.parametrize("tf32", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_matmul_hits_equal_native_cuda(case, tf32, fresh_cache):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        torch.manual_seed(0)
        want = _calls()[case]()
        with eagerc.enabled(DEV, ops=OPS):
            got = [_calls()[case]() for _ in range(3)]  # a miss, then hits
        torch.cuda.synchronize()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    stats = eagerc.stats()["ops"]
    assert sum(stats.get(f"{op}@CUDA", {}).get("hits", 0) for op in OPS) >= 2
    for g in got:
        if tf32:  # TF32 rounds each input to 10 bits: native's own tolerance for it
            torch.testing.assert_close(g, want, rtol=2e-2, atol=2e-2)
        else:
            assert_close(g, want)


def test_a_bert_sized_linear_is_bitwise_natives():
    """addmm with a row bias takes ATen's own cuBLASLt choices (bias epilogue, workspace
    limit, heuristic's first algorithm): the same algorithm, the same bits."""
    x, w, b = (torch.randn(128, 768, device=DEV), torch.randn(768, 768, device=DEV), torch.randn(768, device=DEV))
    want = F.linear(x, w, b)
    with eagerc.enabled(DEV, ops=OPS):
        got = [F.linear(x, w, b) for _ in range(3)]
    for g in got:
        assert torch.equal(g, want)
