"""GPU wrappers make their device's primary CUDA context current before launching.

Inductor's GPU wrapper loads its kernels (``cuModuleLoadData``) and launches them
(``cuLaunchKernel``) through the CUDA driver API, which needs a context current on the
calling thread. Its device guard calls ``cudaSetDevice`` only when the device index
changes, so on a thread that has made no CUDA runtime call yet the first load or launch
fails with "CUDA driver error: invalid device context". The autograd engine's worker thread
is such a thread: a backward on the eagerc device on GPU memory hit it (found on the H100,
docs/benchmarks.md). After each device guard the wrapper now checks for a current context
(one ``cuCtxGetCurrent``); a thread without one selects the guard's device with
``cudaSetDevice``, which makes that device's primary context current (``cudaFree(nullptr)``
does so for runtimes before CUDA 12).
"""
from __future__ import annotations

import re

# The device guard Inductor's JIT C++ wrapper opens (or moves) before its launches.
_GUARD = re.compile(r"(AOTICudaGuard device_guard\([^;]*\);|device_guard\.set_index\([^;]*\);)")

# Inline, not a helper function: at the guard every CUDA header has been included.
_MAKE_CURRENT = (" { CUcontext eagerc_context = nullptr;"
                 " if (cuCtxGetCurrent(&eagerc_context) != CUDA_SUCCESS || eagerc_context == nullptr) {"
                 " int eagerc_device = 0; cudaGetDevice(&eagerc_device);"
                 " cudaSetDevice(eagerc_device); cudaFree(nullptr); } }")


def make_context_current(code: str) -> str:
    """`code` (a GPU wrapper) making a context current after each device guard."""
    return _GUARD.sub(lambda m: m.group(1) + _MAKE_CURRENT, code)
