"""How Inductor's C++ builds of generated wrappers run under eagerc: cheaper, same output.

Inductor builds a cpp_wrapper library through ``codecache._worker_compile_cpp`` with a list
of builders: three (wrapper compile, kernel compile, link) in "build separate" mode, or one
(compile and link). While :func:`routed_builds` is active (for one code generator, whose
wrapper headers and libraries it asks: Codegen.wrapper_headers, stub_linked_libraries),
Inductor appends a minimal Python binding (glue_prelude.minimal_python_binding), its CPU
ISA probe is remembered across processes (vec_isa_memo), and:

- three builders: where clang can, one clang process compiles the kernels and the
  wrapper as one unit and links them (one_unit); else both compiles run at once (each g++
  spends ~0.4 s loading its precompiled header alone; the dev machine has 2 cores), the
  wrapper on eagerc's header (glue_prelude), and the link reads libtorch through an empty
  stub (_through_stubs) and names the process's own libstdc++ (_shared_cxx_runtime);
- one builder that the code generator calls glue (a GPU wrapper, whose kernels are
  Triton's; a CPU graph of extern calls alone): :func:`build_glue`, at -O1 on eagerc's
  header, optionally from a launch plan instead of any compile;
- anything else: Inductor's own worker.

The code generator objects (eagerc/codegen/) decide which builds are glue and how glue is
built; this module holds the mechanics they share.
"""
from __future__ import annotations

import contextlib
import os
import re
from concurrent.futures import ThreadPoolExecutor

from eagerc.codegen.cpp import clang_units, glue_prelude, one_unit, vec_isa_memo


@contextlib.contextmanager
def routed_builds(codegen, is_glue=None, build=None):
    """While active, Inductor's builds of `codegen`'s wrappers go as the module docstring
    says. `is_glue(builder)` says whether a one-step build is glue (default: a CPU graph of
    extern calls, :func:`is_glue_only`); `build(builder)` builds glue (default:
    :func:`build_glue`)."""
    from torch._inductor import codecache

    vec_isa_memo.install()  # every C++ compile (CPU kernels, GPU wrappers) checks the CPU ISA
    original = getattr(codecache, "_worker_compile_cpp", None)
    if original is None:
        with glue_prelude.minimal_python_binding():
            yield
        return
    is_glue = is_glue or is_glue_only

    def worker(lock_path, builders, *args, **kwargs):
        builders = list(builders)
        usable = not (args or kwargs) and all(
            hasattr(b, "build") and hasattr(b, "get_target_file_path") for b in builders)
        if usable and len(builders) == 1 and is_glue(builders[0]):
            from torch.utils._filelock import FileLock

            with FileLock(lock_path, timeout=getattr(codecache, "LOCK_TIMEOUT", 600)):
                if not os.path.exists(builders[0].get_target_file_path()):
                    if build is not None:
                        build(builders[0])
                    else:
                        build_glue(builders[0], codegen)
            return None
        if not usable or len(builders) != 3:
            return original(lock_path, builders, *args, **kwargs)
        *compiles, link = builders
        from torch.utils._filelock import FileLock

        # Same lock and skip-if-built rule as Inductor's worker.
        with FileLock(lock_path, timeout=getattr(codecache, "LOCK_TIMEOUT", 600)):
            if os.path.exists(link.get_target_file_path()):
                return None
            if one_unit.build(compiles, link, codegen, lambda b: link_line(b, codegen)):
                return None
            todo = [b for b in compiles if not os.path.exists(b.get_target_file_path())]
            if todo:
                with ThreadPoolExecutor(len(todo)) as pool:
                    for done in [pool.submit(_compile_unit, b, codegen) for b in todo]:
                        done.result()  # re-raises a compile error
            if not os.path.exists(link.get_target_file_path()):
                link_through_stub(link, codegen)

    codecache._worker_compile_cpp = worker
    try:
        with glue_prelude.minimal_python_binding():
            yield
    finally:
        codecache._worker_compile_cpp = original


def _compile_unit(builder, codegen) -> None:
    """Compile one translation unit of a CPU build: the wrapper with eagerc's prelude where
    it can (glue_prelude), the kernels as Inductor says; either by clang where it can
    (clang_units: its builds of the final command line go first). -w: torch's vector
    headers emit ~130 KB of warnings per kernel compile (~0.08 s); nobody reads them
    (errors still print)."""
    gcc_build = builder.build
    builder.build = lambda: None if clang_units.build(builder) else gcc_build()
    command = getattr(builder, "get_command_line", None)
    if command is None or not glue_prelude.slim_build(builder, command() + " -w", codegen):
        _with_flags(builder, "-w").build()


def is_glue_only(builder) -> bool:
    """Whether a one-step CPU build compiles glue code alone (a graph of extern calls, mm
    say: no C++ kernel of its own), which build_glue builds at -O1."""
    command = getattr(builder, "get_command_line", None)
    source = glue_prelude.source_file(command()) if command else None
    if source is None or not os.path.exists(source):
        return False
    with open(source) as f:
        code = f.read()
    return "cpp_fused" not in code and "cpp_wrapper/cpu.h" in code


def _with_flags(builder, flags: str):
    """`builder` with `flags` appended to its command line (unchanged where this torch's
    CppBuilder has no get_command_line)."""
    command = getattr(builder, "get_command_line", None)
    if command is not None:
        line = command()
        builder.get_command_line = lambda: f"{line} {flags}"
    return builder


_OPTIMIZE = re.compile(r"(?<!\S)-O[23](?!\S)")
# Debug info for glue code nobody debugs: 4% of a GPU wrapper's g++ time (0.70 -> 0.67 s on
# the H100, tools/gpu_probe.py glue).
_NO_DEBUG_INFO = re.compile(r"(?<!\S)-g[0-3]?(?!\S)")
_stub_paths: dict = {}


def _build_with(builder, rewrite, prelude_for=None) -> None:
    """Build with the command line `rewrite(line)` gives, and with `prelude_for` (a code
    generator) eagerc's wrapper header for its code in place of Inductor's (glue_prelude);
    where that build fails (an old linker refusing the stubs, say), as given: the real
    build decides."""
    command = getattr(builder, "get_command_line", None)
    if command is not None:
        cheaper = rewrite(command())
        if prelude_for is not None and glue_prelude.slim_build(builder, cheaper, prelude_for):
            return
        builder.get_command_line = lambda: cheaper
        try:
            return builder.build()
        except Exception:  # noqa: BLE001
            builder.get_command_line = command
    builder.build()


def _through_stubs(line: str, libraries) -> str:
    """`line` with each of `libraries` (a code generator's stub_linked_libraries:
    ``torch_cpu`` for ``-ltorch_cpu``) replaced by an empty library of the same soname
    (forced into DT_NEEDED). The output is the same: a shared library may leave
    symbols undefined, and the loader resolves them in the libraries the process has
    loaded, as it would; but the linker skips reading their dynamic symbol tables
    (libtorch_cpu's 75k symbols: 0.35 s -> 0.06 s). A stub that cannot be made: as given."""
    if not libraries:
        return line
    compiler = line.split()[0] if line else ""
    linked = re.compile(r"(?<!\S)-l(?P<lib>" + "|".join(map(re.escape, libraries)) + r")(?!\S)")

    def stub_link(match):
        stub = _stub_library(compiler, f"lib{match.group('lib')}.so")
        return f"-Wl,--push-state,--no-as-needed {stub} -Wl,--pop-state" if stub else match.group(0)

    return linked.sub(stub_link, line)


def _shared_cxx_runtime(line: str) -> str:
    """`line` linking this process's own libstdc++ (named by path, before the compiler's
    implicit -lstdc++). Where the toolchain links libstdc++ statically, or part of it (the
    GPU machine's did: its libraries carried ~1 MB of it), a library holds its own copy of
    the locale machinery next to the process's, and streaming an integer crashed
    (SIGSEGV in num_put: a compiled kernel's failed index check, formatting __LINE__).
    With the shared library named first every libstdc++ symbol resolves to it; elsewhere
    the output is the same (libstdc++.so.6 is needed either way).

    Only a line that links gets it, as a linker word (``-Wl,PATH``): named bare on a
    compile-only line (``-c``, a precompiled header's ``-x c++-header``), g++ read the
    library as one more source in the line's language, and spent minutes parsing it as
    a header on the GPU machine."""
    runtime = _process_cxx_runtime()
    if not runtime or "," in runtime or _COMPILE_ONLY.search(line):
        return line
    return f"{line} -Wl,{runtime}"


_COMPILE_ONLY = re.compile(r"(?<!\S)(?:-[cES]|-x\s*c\+\+-header)(?!\S)")


def _process_cxx_runtime():
    """Path of the libstdc++ this process has loaded (torch loads it), or None."""
    global _cxx_runtime
    if _cxx_runtime is None:
        _cxx_runtime = ""
        try:
            with open("/proc/self/maps") as maps:
                for entry in maps:
                    path = entry.split()[-1] if entry.count("/") else ""
                    if os.path.basename(path).startswith("libstdc++.so") and os.path.exists(path):
                        _cxx_runtime = path
                        break
        except OSError:
            pass
    return _cxx_runtime or None


_cxx_runtime = None


def build_glue(builder, codegen, from_plan=None) -> None:
    """Compile and link glue code of `codegen`'s (a GPU wrapper, or a CPU graph of extern
    calls) in one step, as Inductor would but cheaper: eagerc's prelude header
    (glue_prelude), -O1 (the wrapper only unpacks handles and launches kernels; torch 2.13
    builds it so itself), no debug info, -w, and libtorch linked through stubs
    (_through_stubs). `from_plan(builder, command) -> bool`, where given, may build it
    without any compile (a launch plan)."""
    command = getattr(builder, "get_command_line", None)
    if command is not None and from_plan is not None and from_plan(builder, command()):
        return
    libraries = codegen.stub_linked_libraries
    _build_with(builder, lambda line: _shared_cxx_runtime(
        _through_stubs(_NO_DEBUG_INFO.sub("", _OPTIMIZE.sub("-O1", line)), libraries)) + " -w",
        prelude_for=codegen)


def link_through_stub(builder, codegen) -> None:
    """Run the link step `builder` of `codegen`'s code with libtorch linked through stubs
    (_through_stubs) and this process's shared libstdc++ (_shared_cxx_runtime)."""
    _build_with(builder, lambda line: _cheaper_link(line, codegen))


def link_line(builder, codegen) -> str:
    """The command line of the link step `builder` as link_through_stub runs it."""
    return _cheaper_link(builder.get_command_line(), codegen)


def _cheaper_link(line: str, codegen) -> str:
    return _shared_cxx_runtime(_through_stubs(line, codegen.stub_linked_libraries))


def _stub_library(compiler: str, soname: str):
    """Path of an empty library named `soname`, or None. One per compiler, kept in
    Inductor's cache folder beside the builds that link it (made once, ~30 ms, by
    whichever process needs it first; a per-process temporary folder would be left
    behind by every process that ends without running atexit, compile workers among them)."""
    if soname not in _stub_paths:
        import hashlib
        import subprocess

        from torch._inductor.runtime.cache_dir_utils import cache_dir

        try:
            folder = os.path.join(cache_dir(), "eagerc-link-stubs",
                                  hashlib.sha256(compiler.encode()).hexdigest()[:16])
            path = os.path.join(folder, soname)
            if not os.path.exists(path):
                os.makedirs(folder, exist_ok=True)
                partial = f"{path}.{os.getpid()}.partial"
                subprocess.run([compiler, "-shared", "-fPIC", "-x", "c++", os.devnull,
                                f"-Wl,-soname,{soname}", "-o", partial],
                               check=True, capture_output=True, timeout=60)
                os.replace(partial, path)  # whole or absent for a process reading beside
        except (OSError, subprocess.SubprocessError):
            path = ""
        _stub_paths[soname] = path
    return _stub_paths[soname] or None
