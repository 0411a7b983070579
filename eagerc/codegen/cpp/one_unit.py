"""A CPU kernel's library from one clang process: its kernels' source and its wrapper's in
one translation unit over one precompiled header, compiled and linked by one clang++.

Why: Inductor's "build separate" mode makes three processes per op (the wrapper's
compile, the kernels' compile, a g++ link). With clang each compile pays its own start
and its own read of a precompiled header (~0.06 s of CPU for an empty file), emits its
own copy of the code both units use (std::string, TORCH_CHECK's message building), and
the link runs g++'s driver, collect2 and ld (~0.05 s). Measured on an abs kernel (CPU
seconds, 2-core dev machine): kernel unit 0.18, wrapper unit 0.25, link 0.05 -> one
unit compiled and linked 0.30.

What changes: the wrapper is compiled with the kernels' flags (-O3 and the vector ISA's
-m flags instead of -O1: glue code, no floating point of its own); the kernels' code is
the same source under the same flags (-ffp-contract=off, no fast math, clang's vectoriser
off), so its results do not change, less an integer-division check that cannot fire
(division_check.py); no debug info (-g1 only named source lines for a
debugger nobody attaches; the code is the same). The link words are those of the link
step (libtorch through its stub, this process's libstdc++: wrapper_build.link_line), run
by gold where it is installed (the same needed libraries; 0.04 s against ld's 0.08 s with
the compiler driver's start).

Where the wrapper is simple (kernel_plan.py: allocations, views, lifted scalars, calls of
its own kernels) the wrapper itself is not compiled: the unit is the kernels and a plain
entry over the C shims, on the kernels' precompiled header (cpp_prefix.h alone); where it
is not, or that unit does not build, the kernels and the wrapper as above.

Where it does not apply (no clang, a parallel kernel with OpenMP pragmas, a wrapper
eagerc's prelude does not cover, clang refusing the unit) nothing is built and the
three-step build runs as before. ``EAGERC_ONE_UNIT=0`` keeps the three steps (A/B timing);
whether it is on is part of every CPU cache key (:func:`identity`, in the key's "units").
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess

from eagerc import _config
from eagerc.codegen.cpp import clang_units, division_check, glue_prelude, kernel_plan

log = logging.getLogger("eagerc")
ENV = "EAGERC_ONE_UNIT"

# Libraries of this process built as one unit, and three-step builds it declined (tests
# read them).
counts = {"one_unit": 0, "declined": 0}

_DEBUG_INFO = re.compile(r"^-g[0-3]?$")


def enabled() -> bool:
    """Whether libraries are built as one unit where they can: clang builds units and
    EAGERC_ONE_UNIT is not "0"."""
    return clang_units.compiler() is not None and _config.variable(ENV).strip() != "0"


def identity() -> str:
    """The units entry of a CPU cache key: clang_units.identity(), and "one-unit" where
    this module builds the libraries ("" where g++ builds every unit)."""
    clang = clang_units.identity()
    # "-2": kernels without a dead integer-division check (division_check.py).
    return f"{clang}|one-unit-2{'|'.join(['', *_linker()])}" if clang and enabled() else clang


@functools.lru_cache(maxsize=1)
def _linker() -> tuple:
    """The linker option of the one clang invocation: gold where installed."""
    return ("-fuse-ld=gold",) if shutil.which("ld.gold") else ()


def build(compiles, link, codegen, link_line) -> bool:
    """Build `link`'s library (its target path) from the two compile builders `compiles`
    (the wrapper's and the kernels', either order) in one clang process; False where it
    cannot (nothing built: the caller builds the three steps). `link_line(builder)` is
    the link step's command line as eagerc runs it."""
    done = _build(compiles, link, codegen, link_line)
    counts["one_unit" if done else "declined"] += 1
    return done


def _build(compiles, link, codegen, link_line) -> bool:
    clang = clang_units.compiler()
    # EAGERC_GLUE_PRELUDE=0 asks for Inductor's wrapper header (A/B): the three steps.
    if not enabled() or len(compiles) != 2 or _config.glue_prelude() == "0":
        return False
    units = []
    for builder in compiles:
        command = getattr(builder, "get_command_line", None)
        source = glue_prelude.source_file(command()) if command else None
        if source is None:
            return False
        try:
            with open(source) as f:
                units.append((builder, command(), source, f.read()))
        except OSError:
            return False
    wrappers = [u for u in units if glue_prelude.slim_source(u[3], codegen) is not None]
    if len(wrappers) != 1:
        return False
    (wrapper,) = wrappers
    (kernel,) = [u for u in units if u is not wrapper]
    _, kernel_line, kernel_source, kernel_code = kernel
    parsed = clang_units.clang_words(kernel_line)
    if parsed is None or clang_units.has_openmp(kernel_code):
        return False
    words, header, _ = parsed
    wrapper_code, devices = glue_prelude.slim_source(wrapper[3], codegen)
    flags = [w for w in clang_units._flags(words, header, kernel_source) if not _DEBUG_INFO.match(w)]
    flags.append("-w")  # torch's vector headers' ~130 KB of warnings per kernel, unread
    # An error-by-default check that -w leaves on: at the end of every unit clang loads each
    # delegating constructor the precompiled header holds to look for cycles (35 M of an
    # empty unit's 238 M instructions, callgrind); generated code delegates no constructor.
    flags.append("-Wno-delegating-ctor-cycles")
    kernels = _not_inlined(wrapper[3]) + division_check.without_dead_check(kernel_code, _cpp_prefix())
    link_words = [*_linker(), *glue_prelude.link_words(link_line(link))]
    entry = _planned_entry(wrapper[3])
    if entry is not None:
        # The kernels and a plain entry on the kernels' own header (kernel_plan.py).
        pch = clang_units.precompiled(clang, header, flags)
        if pch is not None and _compile_and_link(clang, flags, pch, wrapper[2][:-len(".cpp")] + ".plan.cpp",
                                                 kernels + "\n" + entry, link_words, link):
            kernel_plan.counts["plan"] += 1
            return True
        kernel_plan.reasons["its unit did not build"] += 1
    pch = clang_units.precompiled(clang, header, flags, prelude=glue_prelude.prelude_text(devices, codegen))
    if pch is None:
        return False
    return _compile_and_link(clang, flags, pch, wrapper[2][:-len(".cpp")] + ".one_unit.cpp",
                             kernels + "\n" + wrapper_code, link_words, link)


def _not_inlined(wrapper_code: str) -> str:
    """The wrapper's declarations of its kernels, marked noinline, to go before the kernels'
    code: in one unit clang's -O3 otherwise inlines a kernel into the function that calls
    it and optimises its loops twice (abs: 0.186 -> 0.173 CPU-s per library, median of 9
    builds); a call costs nothing next to a kernel, and the kernel's own code is the same."""
    return "".join(decl.replace('extern "C"', 'extern "C" __attribute__((noinline))', 1) + "\n"
                   for decl in kernel_plan.KERNEL_DECLARATION.findall(wrapper_code))


def _planned_entry(wrapper_code: str):
    """kernel_plan's entry for `wrapper_code` (the wrapper as generated, its header line
    included), or None where it has none or plans are off (counted, with why)."""
    if not kernel_plan.enabled():
        return None
    try:
        return kernel_plan.entry_unit(wrapper_code)
    except kernel_plan.Unsupported as e:
        kernel_plan.counts["no_plan"] += 1
        kernel_plan.reasons[str(e)[:160]] += 1
        log.debug("eagerc: no CPU kernel plan (the wrapper is compiled): %s", e)
        return None


def _compile_and_link(clang, flags, pch, combined, text, link_words, link) -> bool:
    """Compile `text` (written to `combined`) on `pch` and link it into `link`'s target in
    one clang process; False (nothing left at the target) where clang refuses it."""
    with open(combined, "w") as f:
        f.write(text)
    line = [clang, *flags, "-include-pch", pch, combined, "-shared", *link_words,
            "-o", link.get_target_file_path()]
    try:
        subprocess.run(line, check=True, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        error = str(getattr(e, "stderr", None) or e)
        log.debug("eagerc: clang could not build %s (the next way will): %s", combined,
                  "\n".join(error.splitlines()[-12:]))
        if clang_units.stale(error):
            with contextlib.suppress(OSError):
                os.unlink(pch)
        with contextlib.suppress(OSError):
            os.unlink(link.get_target_file_path())
        return False
    return True


_prefix_text = None


def _cpp_prefix() -> str:
    """Text of this torch's cpp_prefix.h (every CPU kernel's header), "" if unreadable."""
    global _prefix_text
    if _prefix_text is None:
        import torch

        try:
            with open(os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc",
                                   "inductor", "cpp_prefix.h")) as f:
                _prefix_text = f.read()
        except OSError:
            _prefix_text = ""
    return _prefix_text
