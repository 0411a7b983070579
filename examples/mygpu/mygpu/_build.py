"""Builds the device's runtime (csrc/runtime.cpp) with torch.utils.cpp_extension, once per
machine and torch (the build is cached in torch's extensions directory, and rebuilt when
the source changes).

The runtime is C++ for the host compiler, no CUDA kernels (no nvcc): it needs torch's
headers and the CUDA runtime's library (libcudart; the few functions it calls are declared
in runtime.cpp, no CUDA header is needed). The library is the one this torch has loaded,
so the runtime and torch share one CUDA runtime; else any NVIDIA wheel's on the path or the
CUDA toolkit's (CUDA_HOME, /usr/local/cuda).
"""
from __future__ import annotations

import functools
import glob
import os
import sys



def loaded_library(prefix: str) -> str | None:
    """The path of the shared library named `prefix`* this process has mapped, if any."""
    try:
        with open("/proc/self/maps") as maps:
            paths = [line.split()[-1] for line in maps if "/" in line]
    except OSError:
        return None
    return next((p for p in paths if os.path.basename(p).startswith(prefix) and os.path.exists(p)), None)


def _wheel_roots() -> list:
    """The NVIDIA wheels' package folders on the path (site-packages/nvidia/<name>: cu13 for
    CUDA 13's wheels, cuda_runtime for CUDA 12's)."""
    roots = []
    for entry in sys.path:
        roots += sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*")))
    return [r for r in roots if os.path.isdir(r)]


def _toolkit_roots() -> list:
    from torch.utils.cpp_extension import CUDA_HOME

    return [r for r in (os.environ.get("CUDA_HOME"), CUDA_HOME, "/usr/local/cuda") if r]


def cudart() -> str:
    """The CUDA runtime library: the one torch loaded, else one in an NVIDIA wheel or the
    CUDA toolkit."""
    found = loaded_library("libcudart.so")
    if found:
        return found
    for root in _wheel_roots() + _toolkit_roots():
        for folder in ("lib", "lib64"):
            candidates = sorted(glob.glob(os.path.join(root, folder, "libcudart.so*")))
            if candidates:
                return candidates[0]
    raise RuntimeError("mygpu: no CUDA runtime library (libcudart.so) found to link its runtime with")


@functools.cache
def extension():
    from torch.utils.cpp_extension import load

    library = cudart()
    flags = [library, f"-Wl,-rpath,{os.path.dirname(library)}"]
    # The libstdc++ torch runs with, named before the compiler's implicit one: a toolchain
    # that links libstdc++ statically left a second copy of its locale machinery in a
    # library, and formatting an integer into an error message crashed (eagerc's CMakeLists).
    cxx_runtime = loaded_library("libstdc++.so")
    if cxx_runtime:
        flags.insert(0, cxx_runtime)
    source = os.path.join(os.path.dirname(__file__), "csrc", "runtime.cpp")
    return load(name="mygpu_runtime", sources=[source], extra_cflags=["-O2"],
                extra_ldflags=flags, verbose=False)
