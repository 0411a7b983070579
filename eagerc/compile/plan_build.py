"""Build a GPU artifact from a launch plan: the plan launcher's object (compiled once per
machine, compiler flags and torch) linked with the plan's text and the cubins, assembled
as data. No C++ is compiled per op: a link of ~0.05 s instead of a g++ run of 0.3-0.7 s.

A wrapper launch_plan cannot read (an extern call, a statement it does not know) is built
as before (glue_prelude); so is every wrapper where the launcher's object cannot be built.
``EAGERC_GPU_LAUNCHER=0`` turns plans off (A/B timing).
"""
from __future__ import annotations

import collections
import hashlib
import logging
import os
import re
import subprocess

from eagerc.compile import launch_plan
from eagerc.compile.cexpr import Unsupported

log = logging.getLogger("eagerc")

LAUNCHER_SOURCE = os.path.join(os.path.dirname(__file__), "plan_launcher.cpp")
# Builds of this process: from a plan, and wrappers that had none (with why, by reason).
counts = {"plan": 0, "no_plan": 0}
reasons: collections.Counter = collections.Counter()
_unusable: set = set()  # launcher objects that failed to build in this process
_LINK = re.compile(r"^(-l\S+|-L\S+|-Wl,\S+|\S+\.(so|a)(\.\d+)*)$")
_BINDING = re.compile(r"PyMODINIT_FUNC PyInit_(\w+)\(")


def enabled() -> bool:
    return os.environ.get("EAGERC_GPU_LAUNCHER", "1") != "0"


def launcher_object(flags: list) -> str | None:
    """Path of the plan launcher compiled with `flags` (a wrapper's compile flags, compiler
    first), built under a file lock on first use; None where it cannot be built."""
    import torch
    from torch.utils._filelock import FileLock

    from eagerc.compile.glue_prelude import _header_dir

    with open(LAUNCHER_SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(repr((source, flags, torch.__version__,
                               getattr(torch.version, "git_version", ""))).encode()).hexdigest()[:24]
    if key in _unusable:
        return None
    directory = _header_dir()
    path = os.path.join(directory, f"eagerc_plan_launcher_{key}.o")
    if os.path.exists(path):
        return path
    try:
        os.makedirs(os.path.join(directory, "locks"), exist_ok=True)
        with FileLock(os.path.join(directory, "locks", f"eagerc_plan_launcher_{key}.lock"), timeout=600):
            if not os.path.exists(path):
                partial = f"{path}.{os.getpid()}.o"
                subprocess.run([*flags, "-O2", "-fvisibility=hidden", "-w", "-c", LAUNCHER_SOURCE, "-o", partial],
                               check=True, capture_output=True, timeout=600)
                os.replace(partial, path)  # others see it whole or not at all
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("eagerc: the plan launcher could not be built: %s", getattr(e, "stderr", e))
        _unusable.add(key)
        return None
    return path


def assembly(plan_path: str, cubins: list) -> str:
    """The artifact's data as GNU assembly: each cubin and the plan text in .rodata (NUL
    ended, as the launcher and cuModuleLoadData read them), and the table of cubins."""
    for path in [plan_path, *cubins]:
        if '"' in path or "\\" in path or "\n" in path:
            raise Unsupported(f"cannot embed a file with this path: {path!r}")
    lines = [".section .rodata"]
    for i, path in enumerate(cubins):
        lines += [".balign 64", f"eagerc_plan_cubin_{i}:", f'.incbin "{path}"', ".byte 0"]
    lines += [".balign 8", ".globl eagerc_plan_text", ".hidden eagerc_plan_text", "eagerc_plan_text:",
              f'.incbin "{plan_path}"', ".byte 0",
              '.section .data.rel.ro,"aw"', ".balign 8", ".globl eagerc_plan_cubins",
              ".hidden eagerc_plan_cubins", "eagerc_plan_cubins:"]
    lines += [f".quad eagerc_plan_cubin_{i}" for i in range(len(cubins))] + [".quad 0"]
    lines.append('.section .note.GNU-stack,"",@progbits')  # no executable stack
    return "\n".join(lines) + "\n"


def link_words(command: str) -> list:
    """The libraries and linker options of a compile-and-link command (its output aside)."""
    words, out, skip = command.split(), [], False
    for word in words[1:]:
        if skip:
            skip = False
        elif word == "-o":
            skip = True
        elif _LINK.match(word):
            out.append(word)
    return out


def try_build(builder, command: str) -> bool:
    """Build `builder`'s GPU wrapper (compiled by `command`) from its launch plan; False
    (nothing built) where it has none or the launcher cannot be built or linked."""
    from eagerc.compile import glue_prelude

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
        base = source[:-len(".cpp")]
        with open(base + ".plan", "w") as f:
            f.write(plan)
        with open(base + ".plan.s", "w") as f:
            f.write(assembly(base + ".plan", launch_plan.cubin_paths(code)))
    except Unsupported as e:
        counts["no_plan"] += 1
        reasons[str(e)[:160]] += 1
        log.debug("eagerc: no launch plan for %s: %s", source, e)
        return False
    launcher = launcher_object(glue_prelude._compile_flags(command, source))
    if launcher is None:
        return False
    compiler = command.split()[0]
    target = builder.get_target_file_path()
    try:
        subprocess.run([compiler, "-shared", "-fPIC", launcher, base + ".plan.s", "-o", target,
                        *link_words(command)], check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("eagerc: a launch plan did not link: %s", getattr(e, "stderr", e))
        return False
    counts["plan"] += 1
    return True
