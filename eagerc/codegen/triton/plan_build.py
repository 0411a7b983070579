"""Build a GPU artifact from a launch plan: a copy of the plan launcher (a shared library
built once per machine, compiler flags, libraries and torch) with the plan's text and the
cubins appended after its ELF image. No compiler or linker runs per op: a file write
instead of a g++ run (0.3-0.7 s) or a link (~0.12 s on the H100).

A wrapper launch_plan cannot read (an extern other than cuBLAS's mm family, a statement it
does not know) is built as before (glue_prelude); so is every wrapper where the launcher
cannot be built.
``EAGERC_GPU_LAUNCHER=0`` turns plans off (A/B timing; eagerc/_config.py).
"""
from __future__ import annotations

import collections
import hashlib
import logging
import os
import re
import struct
import subprocess

from eagerc.codegen.cpp import glue_prelude
from eagerc.codegen.triton import launch_plan
from eagerc.codegen.triton.cexpr import Unsupported

log = logging.getLogger("eagerc")

LAUNCHER_DIR = os.path.join(os.path.dirname(__file__), "plan_launcher")
LAUNCHER_SOURCES = sorted(os.path.join(LAUNCHER_DIR, f) for f in os.listdir(LAUNCHER_DIR)
                          if f.endswith((".cpp", ".h")))
# Builds of this process: from a plan, and wrappers that had none (with why, by reason).
counts = {"plan": 0, "no_plan": 0}
reasons: collections.Counter = collections.Counter()
_BINDING = re.compile(r"PyMODINIT_FUNC PyInit_(\w+)\(")
MAGIC = b"EAGERCP1"  # the payload's last 8 bytes (plan_launcher/payload.cpp)


def enabled() -> bool:
    from eagerc import _config

    return _config.gpu_launcher_enabled()


def launcher_library(flags: list, libraries: list) -> str | None:
    """Path of the plan launcher compiled with `flags` (a wrapper's compile flags, compiler
    first) and linked with `libraries` (its link words), built once per machine
    (glue_prelude.built_once); None where it cannot be built."""
    import torch

    sources = []
    for path in LAUNCHER_SOURCES:
        with open(path, "rb") as f:
            sources.append(f.read())
    key = hashlib.sha256(repr((sources, flags, libraries, torch.__version__,
                               getattr(torch.version, "git_version", ""))).encode()).hexdigest()[:24]
    units = [p for p in LAUNCHER_SOURCES if p.endswith(".cpp")]

    def build(partial: str) -> None:
        subprocess.run([*flags, "-O2", "-fvisibility=hidden", "-w", "-shared", *units, "-o", partial, *libraries],
                       check=True, capture_output=True, timeout=600)

    return glue_prelude.built_once(f"eagerc_plan_launcher_{key}.so", build)


def payload(plan: str, cubins: list) -> bytes:
    """What an artifact appends to the launcher (plan_launcher/payload.cpp reads it back): the plan's
    size, the number of cubins, their sizes, the plan, the cubins, the total size, a magic."""
    blobs = []
    for path in cubins:
        with open(path, "rb") as f:
            blobs.append(f.read())
    text = plan.encode()
    words = struct.pack(f"<{2 + len(blobs)}Q", len(text), len(blobs), *map(len, blobs))
    body = words + text + b"".join(blobs)
    return body + struct.pack("<Q", len(body) + 16) + MAGIC


def is_plan_artifact(library: bytes) -> bool:
    """Whether an artifact's bytes are the plan launcher with a plan appended."""
    return library.endswith(MAGIC)


def appended_plan(library: bytes) -> str | None:
    """The plan text appended to an artifact (payload's inverse); None where the artifact
    is not a plan's or its payload is not readable. The launcher library itself names
    every extern it can call, so what one artifact calls is in its plan alone."""
    if not is_plan_artifact(library) or len(library) < 32:
        return None
    (total,) = struct.unpack_from("<Q", library, len(library) - 16)
    start = len(library) - total
    if total < 32 or start < 0:
        return None
    size, n = struct.unpack_from("<2Q", library, start)
    begin = start + 16 + 8 * n
    if begin + size > len(library) - 16:
        return None
    return library[begin:begin + size].decode(errors="replace")


def try_build(builder, command: str) -> bool:
    """Build `builder`'s GPU wrapper (compiled and linked by `command`, as Inductor says:
    the launcher is built with its flags and libraries) from its launch plan; False
    (nothing built) where it has none or the launcher cannot be built."""
    source = glue_prelude.source_file(command)
    if not enabled() or source is None or not os.path.exists(source):
        return False
    with open(source) as f:
        code = f.read()
    if "cpp_wrapper/cuda.h" not in code:
        return False
    try:
        binding = _BINDING.search(code)
        if binding is None or binding.group(1) != "inductor_entry_cpp":
            raise Unsupported("the wrapper's Python binding is not the launcher's")
        plan = launch_plan.plan_of(code)
        appended = payload(plan, launch_plan.cubin_paths(code))
    except (Unsupported, OSError) as e:
        counts["no_plan"] += 1
        reasons[str(e)[:160]] += 1
        log.debug("eagerc: no launch plan for %s: %s", source, e)
        return False
    launcher = launcher_library(glue_prelude._compile_flags(command, source), glue_prelude.link_words(command))
    if launcher is None:
        return False
    with open(launcher, "rb") as f:
        library = f.read()
    target = builder.get_target_file_path()
    partial = f"{target}.{os.getpid()}.partial"
    with open(partial, "wb") as f:
        f.write(library + appended)
    os.replace(partial, target)
    counts["plan"] += 1
    return True
