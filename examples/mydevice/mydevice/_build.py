"""Builds the device's runtime (csrc/runtime.cpp) with torch.utils.cpp_extension, once per
machine and torch (the build is cached in torch's extensions directory, and rebuilt when
the source changes)."""
from __future__ import annotations

import functools
import os


@functools.cache
def extension():
    from torch.utils.cpp_extension import load

    source = os.path.join(os.path.dirname(__file__), "csrc", "runtime.cpp")
    return load(name="mydevice_runtime", sources=[source], extra_cflags=["-O2"], verbose=False)
