"""The translation units of a CPU build (an op's kernels, its wrapper) compiled by clang
where clang is installed; g++ builds what clang cannot.

Why: a g++ compile of an Inductor CPU kernel cannot go below ~0.6 s of CPU, whatever its
includes. g++ re-instantiates, at the end of every translation unit, the function
templates that torch's headers use (the vector classes, c10's numeric types, the standard
library): measured with -ftime-report on an *empty* file that force-includes Inductor's
precompiled cpp_prefix.h (155 MB), 36 MB of template instantiation, 0.6 s of user and
system time; the vector headers alone cost 0.47 s, the standard library alone 0.1-0.3 s.
A precompiled header cannot hold those instantiations for g++. clang's can
(``-fpch-instantiate-templates``), and clang reads a precompiled header lazily: the same
empty file takes 0.08 s, an abs kernel 0.3 s against g++'s 0.9 s, a wrapper on eagerc's
glue header 0.3 s against 0.6 s (CPU seconds on the 2-core dev machine).

What changes and what does not: the same generated source, the same optimisation and
floating-point flags (``-ffp-contract=off``, no fast math; g++'s loop vectoriser is off
and so is clang's, ``-fno-vectorize``), linked by the same g++ link step into the same
kind of library, with g++'s bits: torch's vector headers pick their SIMD lane reduction
(the end of every vectorized sum, softmax, norm) by __GNUC__ > 5, which clang (4) fails,
so the kernel header's clang form adds that block from torch's own header
(:func:`gcc_reductions`); 33 ops over float32/64, float16, bfloat16 and int64 gave the
same bits from both compilers (tests/test_clang_units.py checks 9). A unit whose source
has an OpenMP pragma (a parallel kernel) stays with g++: clang's OpenMP code calls LLVM's
runtime, and torch runs on libgomp. clang needs an
``omp.h`` it can parse (cpp_prefix.h includes it): Debian's libomp-dev has one; without
it the precompiled header cannot be built and g++ builds everything, as before.

``EAGERC_CLANG``: unset, "1" or "auto" uses ``clang++`` on PATH (else the newest
/usr/bin/clang++-N); "0" turns this off; anything else names the compiler. The compiler
used is part of every CPU cache key (:func:`identity`, the key's "units" entry).
"""
from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import logging
import os
import re
import shutil
import subprocess

from eagerc import _config

log = logging.getLogger("eagerc")

ENV = "EAGERC_CLANG"
# Units of this process built by clang, and those it left to g++ (tests read them).
counts = {"clang": 0, "gcc": 0}

_FORCED_INCLUDE = re.compile(r"(?<!\S)-include\s+(\S+)")
# clang's refusal of a precompiled header whose inputs changed since it was made.
_STALE = re.compile(r"has been modified since the (precompiled header|AST file)|"
                    r"precompiled header .* (was|cannot be) |malformed or corrupted AST file")
_OMP_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b", re.M)
# g++ words clang does not take, and what clang says instead (None: dropped).
# -fexcess-precision=fast changes nothing on x86-64 SSE (it is about x87); -fopenmp is
# dropped because only units without OpenMP pragmas come here.
_GCC_ONLY = {"-fno-tree-loop-vectorize": "-fno-vectorize", "-fexcess-precision=fast": None,
             "-fopenmp": None}
_compiler = None


def compiler() -> str | None:
    """Path of the clang++ this process builds units with, or None (EAGERC_CLANG=0, or
    none installed)."""
    global _compiler
    if _compiler is None:
        choice = _config.variable(ENV).strip()
        if choice == "0":
            _compiler = ""
        elif choice not in ("", "1", "auto"):
            _compiler = shutil.which(choice) or ""
        else:
            versions = sorted(glob.glob("/usr/bin/clang++-[0-9]*"),
                              key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0))
            _compiler = shutil.which("clang++") or (versions[-1] if versions else "")
    return _compiler or None


def identity() -> str:
    """The compiler that builds units, for cache keys: "" where g++ builds them all, else
    clang's real path, size and modification time (an upgrade changes them). Every cache
    lookup asks: the compiler's file is looked at once per process, as compiler() chooses
    it once (one replaced in place meanwhile keeps its old identity in this process)."""
    path = compiler()
    return "" if path is None else _file_identity(path)


@functools.lru_cache(maxsize=4)
def _file_identity(path: str) -> str:
    try:
        st = os.stat(path)
        return f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        return path


def clang_words(command: str):
    """(clang's words for the g++ compile `command`, its forced include, its source), or
    None where it is not one compile of one source with a forced include."""
    words = command.split()
    forced = _FORCED_INCLUDE.search(command)
    sources = [w for w in words if w.endswith(".cpp")]
    if forced is None or len(sources) != 1 or "-c" not in words:
        return None
    out = []
    for word in words[1:]:
        if word in _GCC_ONLY:
            if _GCC_ONLY[word]:
                out.append(_GCC_ONLY[word])
        else:
            out.append(word)
    return out, forced.group(1), sources[0]


def _flags(words: list, header: str, source: str) -> list:
    """`words` without the source, the forced include and the output: the flags a
    precompiled header must be built with."""
    flags, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("-o", "-include"):
            skip = True
        elif word not in (source, "-c"):
            flags.append(word)
    return flags


def gcc_reductions(functional_base: str) -> str:
    """After a kernel header: torch's SIMD reductions of float vectors (vec_reduce_all, the
    end of every vectorized sum, max, softmax, norm), which torch's
    ATen/cpu/vec/functional_base.h defines only where __GNUC__ > 5, and clang says 4: it
    would otherwise reduce the 16 lanes one by one, in another order than g++'s kernels
    (other last bits). The block is read from the header given, so it is torch's own code;
    "" where the header has none."""
    try:
        with open(functional_base) as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    starts = [i for i, line in enumerate(lines) if line.startswith("#if defined(__GNUC__) && (__GNUC__ > 5)")]
    if len(starts) != 1:
        return ""
    i = starts[0]
    while lines[i].endswith("\\"):
        i += 1
    depth, body = 0, []
    for line in lines[i + 1:]:
        word = line.lstrip().split(" ")[0]
        if word.startswith("#if"):
            depth += 1
        elif word == "#endif":
            if depth == 0:
                return ("#if !(defined(__GNUC__) && (__GNUC__ > 5))\nnamespace at { namespace vec {\n"
                        + "\n".join(body) + "\n}}\n#endif\n")
            depth -= 1
        body.append(line)
    return ""


def _functional_base() -> str:
    import torch

    return os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "cpu", "vec", "functional_base.h")


def has_openmp(code: str) -> bool:
    """Whether C++ source `code` has an OpenMP pragma (a parallel kernel: g++ builds it)."""
    return _OMP_PRAGMA.search(code) is not None


def stale(error: str) -> bool:
    """Whether clang's `error` refuses a precompiled header whose inputs changed since it
    was made (the caller deletes it, and the next compile makes it again)."""
    return _STALE.search(error) is not None


def precompiled(clang: str, header: str, flags: list, prelude: str = "") -> str | None:
    """Path of clang's precompiled form of `prelude` (C++ text), then `header` (and
    gcc_reductions) for `flags` (built once per machine, beside g++'s), or None where
    clang cannot build it."""
    import torch

    from eagerc.codegen.cpp.glue_prelude import _header_dir, built_once

    try:
        with open(header) as f:
            text = f.read()
    except OSError:
        return None
    # A kernel's header (Inductor's cpp_prefix.h) gets g++'s vector reductions after it.
    after = gcc_reductions(_functional_base()) if "cpp_prefix.h" in text else ""
    key = hashlib.sha256(repr((header, text, after, flags, identity(), torch.__version__,
                               getattr(torch.version, "git_version", ""))
                              + ((prelude,) if prelude else ())).encode()).hexdigest()[:24]
    # clang checks on every use that the files a precompiled header was made of are
    # unchanged: this one stays beside it.
    prefixed = os.path.join(_header_dir(), f"eagerc_clang_{key}.h")
    if not os.path.exists(prefixed):
        os.makedirs(os.path.dirname(prefixed), exist_ok=True)
        partial = f"{prefixed}.{os.getpid()}.partial"
        with open(partial, "w") as f:
            f.write((f"{prelude}\n" if prelude else "") + f'#include "{header}"\n{after}')
        os.replace(partial, prefixed)

    def build(partial: str) -> None:
        subprocess.run([clang, *flags, "-fpch-instantiate-templates", "-x", "c++-header", prefixed,
                        "-o", partial], check=True, capture_output=True, timeout=600)

    return built_once(os.path.basename(prefixed) + ".pch", build)


def build(builder) -> bool:
    """Compile `builder`'s unit (its command line as it stands: Inductor's kernel compile,
    or the wrapper compile glue_prelude rewrote) with clang on a clang precompiled header
    of the same forced include; False (nothing built) where clang cannot: no clang, a
    parallel kernel, another kind of command, or clang's compile failing (g++ then builds
    it, so a unit clang rejects costs time, never a result)."""
    clang = compiler()
    command = getattr(builder, "get_command_line", None)
    parsed = clang_words(command()) if clang and command else None
    if parsed is None:
        counts["gcc"] += 1
        return False
    words, header, source = parsed
    try:
        with open(source) as f:
            parallel = has_openmp(f.read())
    except OSError:
        parallel = True
    pch = None if parallel else precompiled(clang, header, _flags(words, header, source))
    if pch is None:
        counts["gcc"] += 1
        return False
    line, skip = [clang], False
    for word in words:
        if skip:
            line.append(pch)
            skip = False
        elif word == "-include":
            line.append("-include-pch")
            skip = True
        else:
            line.append(word)
    try:
        subprocess.run(line, check=True, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        error = str(getattr(e, "stderr", None) or e)
        log.debug("eagerc: clang could not compile %s (g++ will): %s", source,
                  "\n".join(error.splitlines()[-12:]))
        if stale(error):
            # A header it was made of changed (a system or torch update in place): the next
            # compile makes it again instead of every compile falling back to g++.
            with contextlib.suppress(OSError):
                os.unlink(pch)
        counts["gcc"] += 1
        return False
    counts["clang"] += 1
    return True
