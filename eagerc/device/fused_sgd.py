"""A fused SGD step (``torch.optim.SGD(fused=True)``) of float16/bfloat16 parameters on
host memory, computed in float32.

ATen's CPU fused SGD kernel leaves float16 and bfloat16 parameters unchanged except for
the elements past its last full vector: its vectorized loop (FusedSGDKernel.cpp's
``sgd_math`` for Half/BFloat16, torch 2.13) converts the parameter to float and computes the
momentum, but never computes and stores the updated parameter; only the scalar tail does.
``torch._fused_sgd_`` of 40 float16 ones by a gradient of ones at lr 0.1 gives 1.0 for
the first 32 elements and 0.9 for the last 8 on CPU; the unfused step (``fused=False``)
and CUDA's fused kernel give 0.9 everywhere.

On host memory the device's kernels are the CPU's, so its fused step inherited that: a
model trained in half precision with ``SGD(fused=True)`` on the device did not train
(TorchCTS level 4's ``test_fused_optimizer_pipelines[SGD-float16]`` and ``[SGD-bfloat16]``
compare it with the unfused step). Here the device runs the CPU's kernel on float32 copies
of its half-precision parameters, gradients and momentum buffers and stores them back
rounded: CUDA's fused kernel's math (float32 opmath, rounded where it stores). Other
dtypes, and GPU memory (CUDA's kernel is right), are not touched.

It is the device's autograd kernel of ``_fused_sgd_`` (an optimizer's step runs under
no_grad, where autograd only passes the call on), so eagerc's own kernel of the op (ATen's
CPU kernel on aliases) still serves every call below it.
"""
from __future__ import annotations

import torch

_HALF = (torch.float16, torch.bfloat16)
_library = None


def install() -> None:
    """Register the device's autograd kernel of ``aten::_fused_sgd_`` (both overloads).

        >>> import torch, eagerc
        >>> p = torch.ones(40, dtype=torch.float16, device="eagerc")
        >>> g = torch.ones(40, dtype=torch.float16, device="eagerc")
        >>> torch._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=0.1,
        ...                   dampening=0.0, nesterov=False, maximize=False, is_first_step=True)
        >>> bool((p.cpu() == torch.tensor(0.9, dtype=torch.float16)).all())
        True
    """
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for name, overload in (("_fused_sgd_", "default"), ("_fused_sgd_.tensor_lr", "tensor_lr")):
        op = getattr(torch.ops.aten._fused_sgd_, overload)
        _library.impl(name, _step_in_float32(op), "AutogradPrivateUse1")


def _step_in_float32(op):
    def fused_sgd_(params, grads, momentum_buffers, **kwargs):
        lists = (params, grads, momentum_buffers)
        if not any(t.dtype in _HALF for tensors in lists for t in tensors):
            with torch._C._AutoDispatchBelowAutograd():
                return op(params, grads, momentum_buffers, **kwargs)
        wide = [[t.float() if t.dtype in _HALF else t for t in tensors] for tensors in lists]
        with torch._C._AutoDispatchBelowAutograd():
            op(*wide, **kwargs)
        # The kernel writes the parameters, the momentum buffers, and with a grad_scale the
        # gradients (unscaled).
        written = (0, 2, 1) if kwargs.get("grad_scale") is not None else (0, 2)
        with torch.no_grad():
            for i in written:
                for t, c in zip(lists[i], wide[i]):
                    if c is not t:
                        t.copy_(c)

    return fused_sgd_
