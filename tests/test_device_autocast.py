"""torch.amp on the eagerc device, and what `import eagerc` must not break around it.

`import eagerc` makes the device torch's current accelerator, so code that asks torch for
the accelerator's autocast (torch.utils.checkpoint does, even around CPU-only code) reaches
the device's AMP support: its module names the dtypes autocast may cast to, and the device
registers CUDA's cast policies (csrc/device/autocast.cpp).
"""
import pytest
import torch
from torch.utils.checkpoint import checkpoint

import eagerc  # noqa: F401  (registers the eagerc device)
from eagerc.testing import assert_close

pytestmark = pytest.mark.skipif(torch._C._get_privateuse1_backend_name() != "eagerc",
                                reason="the eagerc device is not registered")


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_of_cpu_code_with_eagerc_imported(reentrant):
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(16, 8))
    x = torch.randn(4, 8, requires_grad=True)
    torch.manual_seed(1)
    plain = block(x)
    plain.sum().backward()
    want_x, want_w = x.grad.clone(), block[0].weight.grad.clone()
    x.grad = None
    block.zero_grad()
    torch.manual_seed(1)  # the recomputation replays the same dropout mask
    out = checkpoint(block, x, use_reentrant=reentrant)
    out.sum().backward()
    assert_close(out, plain)
    assert_close(x.grad, want_x)
    assert_close(block[0].weight.grad, want_w)


def test_amp_supported_dtypes():
    assert torch.amp.is_autocast_available("eagerc")
    assert set(torch.eagerc.get_amp_supported_dtype()) == {torch.float16, torch.bfloat16}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_casts_as_cuda_does(dtype):
    torch.manual_seed(0)
    a, b, bias = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4)
    da, db, dbias = (t.to("eagerc") for t in (a, b, bias))
    with torch.autocast("eagerc", dtype=dtype):
        mm = da @ db                                    # lower precision
        lin = torch.nn.functional.linear(da, db.t().contiguous(), dbias)
        soft = torch.softmax(mm, -1)                    # float32 (its own dtype argument)
        total = mm.sum()                                # float32
        added = mm + 1                                  # no policy: the input's dtype
    assert (mm.dtype, lin.dtype, soft.dtype, total.dtype, added.dtype) == (dtype, dtype, torch.float32,
                                                                           torch.float32, dtype)
    assert all(t.device.type == "eagerc" for t in (mm, lin, soft, total, added))
    want = a.to(dtype) @ b.to(dtype)
    assert_close(mm.cpu(), want)
    # float32 softmax of the device's own low-precision product (on GPU memory cuBLAS's
    # rounding of it differs from CPU's by an ulp, which softmax carries at float32's tolerance).
    assert_close(soft.cpu(), torch.softmax(mm.cpu().float(), -1))
    assert_close(lin.cpu(), torch.nn.functional.linear(a.to(dtype), b.t().contiguous().to(dtype), bias.to(dtype)))
    # Outside the region nothing is cast.
    assert (da @ db).dtype == torch.float32


def test_autocast_disabled_region_and_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    model = model.to("eagerc")
    x = torch.randn(4, 8)
    with torch.autocast("eagerc", dtype=torch.bfloat16):
        out = model(x.to("eagerc"))
        with torch.autocast("eagerc", enabled=False):
            inner = model[0](x.to("eagerc"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = ref(x)
    assert out.dtype == torch.bfloat16 and inner.dtype == torch.float32
    assert_close(out.float().cpu(), want.float(), atol=2e-2, rtol=2e-2)
    out.float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and p.grad.device.type == "eagerc"
               for p in model.parameters())
