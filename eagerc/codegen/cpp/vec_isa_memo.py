"""Remember, across processes, which CPU vector ISAs Inductor found usable.

Before its first C++ compile in a process (CPU kernels, and the C++ wrapper of GPU
graphs too), Inductor checks each vector ISA the CPU reports (AVX-512, AVX2, ...) by
compiling a probe library and loading it in a child Python. It keeps the answer for that
process only, so every process pays it again: on the GPU machine, whose Python starts
slowly, this was 25-30 s of the first compile of each process (docs/benchmarks.md).

The probe's answer depends only on this torch, the C++ compiler, the ISA and the CPU (all
in the key), not on any cache's contents, so eagerc keeps positive answers once per
machine and user: in ``$EAGERC_PROBE_DIR``, else ``~/.cache/eagerc-probes`` (a fresh
Inductor or eagerc cache directory does not probe again). A negative answer is never
kept: it may come from a passing condition (a probe that timed out under load), and
probing again costs only time.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform

from eagerc.codegen.cpp.toolchain import cxx_compiler



def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features", "features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _verdict_path(isa, code: str) -> str:
    import torch

    key = "\n".join((torch.__version__, cxx_compiler(), str(isa), isa.build_arch_flags(),
                     " ".join(isa.build_macro()), _cpu_flags(), code))
    return os.path.join(_directory(), hashlib.sha256(key.encode()).hexdigest()[:32])


def _directory() -> str:
    from eagerc import _config

    return _config.probe_directory()


def memoized(check_build):
    """``check_build(isa, code) -> bool`` answering True at once where it said so before."""
    @functools.wraps(check_build)
    def remembered(isa, code: str) -> bool:
        try:
            path = _verdict_path(isa, code)
        except Exception:  # noqa: BLE001 - no memo: Inductor's own check decides
            return check_build(isa, code)
        if os.path.exists(path):
            return True
        ok = check_build(isa, code)
        if ok:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "a"):
                    pass
            except OSError:
                pass  # a read-only cache directory: the next process probes again
        return ok

    remembered._eagerc_memo = True
    return remembered


def install() -> None:
    """Wrap Inductor's ISA probe (``VecISA.check_build``) with the cross-process memo."""
    from torch._inductor.cpu_vec_isa import VecISA

    if not getattr(VecISA.check_build, "_eagerc_memo", False):
        VecISA.check_build = memoized(VecISA.check_build)
