"""The C++ compiler eagerc builds generated wrappers and kernels with, and how it has Inductor
run it: part of every cache key (the C++ code generator's and the Triton code generator's,
whose wrappers are host C++ too)."""
from __future__ import annotations

import os
import shutil

from eagerc import _config

# How eagerc has Inductor build a CPU kernel (part of every cache key: a change here is a
# new namespace). Measured on torch 2.13, 2 cores: Inductor's default, one translation unit
# (wrapper + kernels + Python binding) at -O3, cost ~1.6 s of g++ (its precompiled header
# covers the wrapper's headers only, so the kernels' vector headers, cpp_prefix.h, were
# parsed every time) and ~0.4 s of ld reading libtorch_cpu's 75k dynamic symbols. Instead,
# Inductor's "build separate" mode: the wrapper (glue code) at -O1 on eagerc's own header
# (codegen/cpp/glue_prelude.py), the kernels with Inductor's unchanged -O3 flags, each
# translation unit with its own precompiled header, the two compiles in parallel, libtorch
# linked through an empty stub (codegen/cpp/wrapper_build.py); input size asserts left to
# eagerc's guard; a graph of extern calls alone built as glue at -O1. ~0.9 s per kernel.
BUILD_RECIPE = "cpu-build-v2:separate-O1-wrapper:no-input-asserts:torch-cpu-link-stub:glue-prelude-v1"


def cxx_compiler() -> str:
    """The C++ compiler Inductor runs, identified by path, size and modification time (a
    compiler upgrade changes them), the flags variables it reads, and how eagerc builds
    host C++ (BUILD_RECIPE; GPU wrappers are host C++ too)."""
    name = _config.variable("CXX") or "g++"
    path = shutil.which(name) or name
    try:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        ident = path
    flags = tuple(_config.variable(v) for v in ("CXXFLAGS", "CPPFLAGS", "LDFLAGS"))
    return f"{ident}|{flags}|{BUILD_RECIPE}"
