"""``module.to("eagerc")`` keeps tied and shared parameters tied, as on CPU and CUDA.

``nn.Module._apply`` keeps a parameter object (``param.data = converted``) only when the
two tensors' types are "shallow-copy compatible", which torch grants to CPU, CUDA and a few
named backends but not to a PrivateUse1 device. Every other device gets a new Parameter per
module, so a weight tied between two modules (GPT-2's and T5's embeddings and LM heads)
became two weights on the device, and training diverged from CPU. Conversions to the
device therefore run on torch's swap path (``torch.__future__`` swap_module_params_on_
conversion: the parameter objects stay, their contents are swapped), which keeps ties and an
optimizer's references, as CUDA does.

    >>> import torch, eagerc
    >>> m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    >>> m[1].weight = m[0].weight
    >>> on_device = m.to("eagerc")
    >>> on_device[0].weight is on_device[1].weight, on_device[0].weight.device.type
    (True, 'eagerc')
"""
from __future__ import annotations

import functools
import warnings

import torch

_installed = False
_warned = False


def install(device_type: str) -> None:
    """Wraps ``nn.Module.to`` once: conversions to `device_type` keep parameter objects."""
    global _installed
    if _installed:
        return
    _installed = True
    original = torch.nn.Module.to

    @functools.wraps(original)
    def to(self, *args, **kwargs):
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is None or device.type != device_type or torch.__future__.get_swap_module_params_on_conversion():
            return original(self, *args, **kwargs)
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            return original(self, *args, **kwargs)
        except RuntimeError as error:
            # swap_tensors refuses tensors with weak references (a torch.compile guard
            # holds some): convert the rest as torch would without the swap path.
            _warn_untied(error)
            torch.__future__.set_swap_module_params_on_conversion(False)
            return original(self, *args, **kwargs)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)

    torch.nn.Module.to = to


def _warn_untied(error: Exception) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"module.to(eagerc) could not keep parameter objects ({error}); parameters "
                      "tied between modules are converted separately, as torch does for a "
                      "PrivateUse1 device. Re-tie them after the move (transformers: "
                      "model.tie_weights()).", stacklevel=3)
