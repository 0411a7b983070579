"""An op with no kernel for dense tensors anywhere (matmul_backward has NestedTensor
kernels only) raises on the eagerc device what eager's dispatcher raises on a device
without a kernel: NotImplementedError naming the device, for the functional and the out=
form, in either compile mode and on a second call. The host round trip used to move the
failure to the CPU and name the CPU."""

from __future__ import annotations

import pytest
import torch

import eagerc  # noqa: F401


def _matmul_backward(out: bool):
    a = torch.ones(2, 2, device="eagerc")
    if out:
        return torch.ops.aten.matmul_backward.out(a, a, a, [True, True], out0=a.clone(), out1=a.clone())
    return torch.ops.aten.matmul_backward(a, a, a, [True, True])


@pytest.mark.parametrize("compile_mode", ["background", "now"])
@pytest.mark.parametrize("out", [False, True])
def test_an_op_without_dense_kernels_names_the_device(compile_mode, out, fresh_cache, monkeypatch):
    monkeypatch.setenv("EAGERC_COMPILE", compile_mode)
    # The CPU's own message for the same call names the CPU: the device's names the device.
    a = torch.ones(2, 2)
    with pytest.raises(NotImplementedError, match="Could not run 'aten::matmul_backward' with "
                                                  "arguments from the 'CPU' backend"):
        torch.ops.aten.matmul_backward(a, a, a, [True, True])
    for _ in range(2):
        with pytest.raises(NotImplementedError, match="Could not run 'aten::matmul_backward' with "
                                                      "arguments from the 'eagerc' backend"):
            _matmul_backward(out)


def test_the_device_still_computes_after_the_refusal(fresh_cache):
    with pytest.raises(NotImplementedError):
        _matmul_backward(False)
    x = torch.randn(3, 4)
    torch.testing.assert_close((x.to("eagerc") @ x.T.to("eagerc")).cpu(), x @ x.T)
