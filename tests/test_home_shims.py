"""Which compiled ops run on a device's own tensors and which on aliases of its memory's
home (the code generators' needs_home_aliases, eagerc/codegen/, Target.allocate_outputs,
stats' on_home_aliases)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc import _config, codegen, targets
from eagerc.testing import assert_close

GPU_MEMORY = targets.Target(device="eagerc", dispatch_key="PrivateUse1", codegen=codegen.TRITON,
                            host_aliases=True, new_device=True)


@pytest.mark.parametrize("home,code,needs", [
    ("cpu", "aoti_torch_cpu_convolution(buf0, arg0, ...);", True),
    ("cpu", "aoti_torch_cpu_addmm_out(buf0, arg2, arg0, arg1, 1, 1);", False),
    ("cpu", "aoti_torch_cpu_addmm_out(b, x, y, z, 1, 1); aoti_torch_cpu_randint(...);", True),
    ("cpu", "aoti_torch_empty_strided(2, s, st, dt, cached_torch_device_type_cpu, 0, &h);", False),
    # CUDA's shims guard the tensors' device with a CUDAGuard, which refuses eagerc's.
    ("cuda", "aoti_torch_cuda_addmm_out(buf0, arg2, arg0, arg1, 1, 1);", True),
    ("cuda", "aoti_torch_cuda_bmm_out(buf0, arg0, arg1);", True),
    ("cuda", "aoti_torch_cuda_convolution(arg0, arg1, ...);", True),
    ("cuda", "aoti_torch_cuda__scaled_dot_product_efficient_attention(q, k, v, ...);", True),
    # A GPU wrapper's stream and allocation helpers are not ATen functions of the home.
    ("cuda", "aoti_torch_get_current_cuda_stream(0, (void**)&stream);", False),
    ("cuda", "aoti_torch_cuda_guard_set_index(guard, 0);", False),
    # A CPU shim in a GPU wrapper is CPU work on CPU tensors (a scalar), not the home's.
    ("cuda", "aoti_torch_cpu_mul(a, b);", False),
])
def test_which_wrappers_need_the_homes_tensors(home, code, needs):
    assert codegen.for_home(home).needs_home_aliases(code) is needs


def test_gpu_memory_target_allocates_outputs_on_the_device():
    code = ("CACHE_TORCH_DEVICE(cuda);\nCACHE_TORCH_DEVICE(cpu);\n"
            "aoti_torch_empty_strided(2, s, st, dt, cached_torch_device_type_cuda, 0, &h);\n"
            "aoti_torch_empty_strided(0, s, st, dt, cached_torch_device_type_cpu, 0, &c);\n")
    out = GPU_MEMORY.allocate_outputs(code)
    assert "CACHE_TORCH_DEVICE(privateuse1);" in out and "cached_torch_device_type_cuda" not in out
    # A host scalar of a GPU wrapper stays on the host.
    assert "CACHE_TORCH_DEVICE(cpu);" in out and "cached_torch_device_type_cpu, 0, &c" in out


@pytest.mark.skipif(_config.device_backing() != "cpu", reason="the eagerc device is on GPU memory here")
def test_host_memory_device_runs_generated_and_blas_kernels_on_its_own_tensors():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(5)
    m = torch.randn(192, 5)
    xd, wd, bd, md = (t.to("eagerc") for t in (x, w, b, m))
    eagerc.reset_stats()
    got = {"abs": torch.abs(xd), "conv": F.conv2d(xd, wd), "addmm": torch.addmm(bd, xd.flatten(1), md)}
    want = {"abs": torch.abs(x), "conv": F.conv2d(x, w), "addmm": torch.addmm(b, x.flatten(1), m)}
    for k in got:
        assert got[k].device.type == "eagerc"
        assert_close(got[k].cpu(), want[k])
    ops = eagerc.stats()["ops"]
    assert ops["aten::abs@PrivateUse1"]["on_home_aliases"] is False
    assert ops["aten::addmm@PrivateUse1"]["on_home_aliases"] is False
    # ATen picks a convolution's backend by the input's device type: CPU aliases.
    assert ops["aten::convolution@PrivateUse1"]["on_home_aliases"] is True
    # One call, one count: a first call that learns its kernel needs the home's aliases is
    # looked up again on them, and only that lookup counts.
    assert ops["aten::convolution@PrivateUse1"]["misses"] == 1, ops["aten::convolution@PrivateUse1"]
