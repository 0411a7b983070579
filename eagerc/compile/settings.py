"""The compiler settings that change generated code: part of every cache key.

Read without importing Inductor when no one has: a process whose kernels are all on disk
never pays Inductor's import (about a second). Until something imports
``torch._inductor.config``, Inductor's settings are this torch's defaults (the torch
version is in the key) except what ``TORCHINDUCTOR_*`` variables set; once imported, every
entry a program changed (``config.x = ...``) counts too. Entries that only steer caches,
logging or worker processes are left out: they do not change code.
"""
from __future__ import annotations

import contextvars
import hashlib
import os
import re
import shutil
import sys

# Settings that never change the generated code.
_NOT_CODE = re.compile(r"cache|compile_threads|worker|trace\.|verbose|log|debug_dir|profil|benchmark_harness")


def digest(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def inductor_environment() -> list:
    """TORCHINDUCTOR_* variables that may change code, as sorted (name, value) pairs."""
    return sorted((k, v) for k, v in os.environ.items()
                  if k.startswith("TORCHINDUCTOR_") and not _NOT_CODE.search(k.lower()))


def inductor_overrides() -> list:
    """Entries of torch._inductor.config a program set to a non-default value (none when
    the module was never imported: nothing could have set them)."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return []
    from torch.utils._config_module import _UNSET_SENTINEL

    changed = []
    for name, entry in getattr(config, "_config", {}).items():
        if _NOT_CODE.search(name):
            continue
        value = entry.user_override
        if isinstance(value, contextvars.ContextVar):  # torch >= 2.13; a plain value before
            value = value.get()
        if value is not _UNSET_SENTINEL and value != entry.default:
            changed.append((name, repr(value)))
    return sorted(changed)


# How eagerc has Inductor build a CPU kernel (eagerc/compile/inductor_wrapper.py): wrapper
# at -O1 and kernels at Inductor's -O3 as two translation units, input size asserts left
# to eagerc's guard, libtorch_cpu linked through a stub, the wrapper on eagerc's own header
# (compile/glue_prelude.py; a graph of extern calls alone built as glue at -O1). A change
# here is a new namespace.
BUILD_RECIPE = "cpu-build-v2:separate-O1-wrapper:no-input-asserts:torch-cpu-link-stub:glue-prelude-v1"
# And a GPU graph: the wrapper (glue) at -O1 on eagerc's header (the lean one where it fits:
# compile/lean_gpu_prelude.py), linked through libtorch stubs.
GPU_BUILD_RECIPE = "gpu-build-v4:O1-glue:no-debug-info:torch-link-stubs:glue-prelude-v1:lean-gpu-prelude-v2:plan-launcher-v1"


def cxx_compiler() -> str:
    """The C++ compiler Inductor runs, identified by path, size and modification time (a
    compiler upgrade changes them), the flags variables it reads, and eagerc's
    BUILD_RECIPE."""
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name) or name
    try:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        ident = path
    flags = tuple(os.environ.get(v, "") for v in ("CXXFLAGS", "CPPFLAGS", "LDFLAGS"))
    return f"{ident}|{flags}|{BUILD_RECIPE}"
