"""mydevice is imported before eagerc (eagerc then serves it instead of registering its own
device); the ATen kernels the device itself registered are recorded in between."""
import torch

import mydevice  # noqa: F401  (first: it renames PrivateUse1)

OWN_KERNELS = sorted(op for op in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
                     if op.startswith("aten::"))

import eagerc  # noqa: E402,F401  (serves every other op on mydevice)
