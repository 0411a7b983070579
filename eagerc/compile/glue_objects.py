"""A cache of compiled glue code: the wrapper object of a one-step glue build (a GPU wrapper,
or a CPU graph of extern calls), keyed by its source with everything op-specific taken out.

Why: a GPU graph's cold compile spends ~0.7 s of its ~1.3 s in g++ on the wrapper
(docs/benchmarks.md), and the wrappers of ops of one shape (unary pointwise, binary
pointwise, ... on the same dtypes) are the same program: they differ only in the Triton
kernel they embed (its cubin bytes and name) and in comments. So the build is split:

- the wrapper without those (`split`): cubins and kernel names become symbols it declares,
  its kernel identifiers are numbered, whole-line comments go. Compiled once per distinct
  text (with its compile flags and compiler) and kept as ``<key>.o`` (its text beside it,
  ``<key>.cpp``);
- the op's own bytes (cubins, kernel names) as assembler source, assembled on each build
  (a few ms);
- the two linked into the library the command names (~0.05 s), as the one-step build would
  have made it: an artifact stays one self-contained file.

The objects live in the eagerc cache directory (``glue-objects/``), so clearing that cache
clears them, and a fresh cache directory measures a truly cold compile. An object is a pure
function of its key; one that fails to link is deleted and compiled again.
``EAGERC_GLUE_OBJECTS=0`` switches the cache off.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import subprocess

# Part of every key: a change to what `split` produces or how objects are built.
FORMAT = "glue-objects-v1"

# The cubin embedding eagerc writes (inductor_wrapper.embed_cubins): one line per cubin.
_CUBIN_ASM = re.compile(r'^__asm__\("(?P<body>.*\.incbin .*)"\);[ \t]*\n', re.M)
# A kernel load from an embedded cubin: its Triton kernel's name is a string literal.
_KERNEL_LOAD = re.compile(r'loadKernel\((?P<blob>eagerc_cubin_\d+), "(?P<name>\w+)",')
_COMMENT_LINE = re.compile(r"^[ \t]*//[^\n]*\n", re.M)
# Link-only words of a compile-and-link command.
_LINK_WORD = re.compile(r"^(-l\S*|-L\S*|-Wl,\S*|-shared|\S+\.(so|a)(\.\d+)*)$")

# Builds of this process: objects reused, objects compiled, objects found broken.
counts = {"hits": 0, "compiled": 0, "rebuilt": 0}


@dataclasses.dataclass
class SplitGlue:
    code: str      # the C++ source, op-specific bytes and names taken out
    assembly: str  # those bytes and names, as assembler source defining the symbols


def split(code: str) -> SplitGlue:
    """`code` (a generated wrapper as eagerc hands it to g++) as the shape-generic C++ source
    and the op's own assembler source. Code without embedded cubins splits into itself
    (less comments) and an empty assembly."""
    blobs = [m.group("body").replace('\\"', '"').replace("\\n", "\n") for m in _CUBIN_ASM.finditer(code)]
    names = []

    def name_symbol(match):
        names.append(match.group("name"))
        return f"loadKernel({match.group('blob')}, eagerc_kernel_name_{len(names) - 1},"

    code = _KERNEL_LOAD.sub(name_symbol, code)
    # The kernels' identifiers (their CUfunction variable, their call_ helper), longest name
    # first so that no name is replaced inside a longer one.
    for name in sorted(set(names), key=len, reverse=True):
        code = re.sub(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])",
                      f"eagerc_kernel_{names.index(name)}", code)
    declarations = "".join(f'extern "C" const char eagerc_kernel_name_{i}[];\n' for i in range(len(names)))
    first = _CUBIN_ASM.search(code)
    if first is not None:
        code = code[:first.start()] + declarations + _CUBIN_ASM.sub("", code[first.start():])
    elif declarations:
        raise ValueError("a kernel is loaded from a cubin this source does not embed")
    strings = "".join(f".globl eagerc_kernel_name_{i}\n.hidden eagerc_kernel_name_{i}\n"
                      f'eagerc_kernel_name_{i}:\n.asciz "{name}"\n' for i, name in enumerate(names))
    assembly = ""
    if blobs or strings:
        assembly = "".join(blobs) + ".section .rodata\n" + strings + '.section .note.GNU-stack,"",@progbits\n'
    return SplitGlue(_COMMENT_LINE.sub("", code), assembly)


def _directory() -> str:
    from kernel_cache.layout import default_directory

    return os.path.join(default_directory(), "glue-objects")


def _parse(command: str):
    """(words, source, output) of a one-step compile-and-link command, or None."""
    words = shlex.split(command)
    sources = [w for w in words if w.endswith(".cpp")]
    if len(sources) != 1 or "-o" not in words or "-c" in words or "-shared" not in words:
        return None
    output_at = words.index("-o") + 1
    if output_at >= len(words):
        return None
    return words, sources[0], words[output_at]


def _run(words: list, cwd: str) -> None:
    subprocess.run(words, cwd=cwd, check=True, capture_output=True, timeout=600)


def build(command: str) -> bool:
    """Build what `command` (a one-step compile-and-link of one C++ source into a shared
    library) builds, through the object cache. False where the cache does not apply (switched
    off, another command form): the caller builds as it would have. Raises
    subprocess.CalledProcessError where the source does not compile, as the command would."""
    if os.environ.get("EAGERC_GLUE_OBJECTS", "1") == "0":
        return False
    parsed = _parse(command)
    if parsed is None:
        return False
    words, source, output = parsed
    from eagerc.compile.settings import cxx_compiler

    with open(source) as f:
        glue = split(f.read())
    compile_words = [w for w in words if w not in (source, output) and w != "-o" and not _LINK_WORD.match(w)]
    import torch

    key = hashlib.sha256(repr((FORMAT, glue.code, compile_words, cxx_compiler(),
                               torch.__version__)).encode()).hexdigest()[:32]
    directory = _directory()
    os.makedirs(directory, exist_ok=True)
    obj = os.path.join(directory, f"{key}.o")
    cwd = os.path.dirname(os.path.abspath(output))
    stem = os.path.splitext(source)[0]
    objects = [obj]
    if glue.assembly:
        with open(f"{stem}.eagerc-bytes.s", "w") as f:
            f.write(glue.assembly)
        _run([words[0], "-c", f"{stem}.eagerc-bytes.s", "-o", f"{stem}.eagerc-bytes.o"], cwd)
        objects.append(f"{stem}.eagerc-bytes.o")
    link = [w for w in words if w != source]
    link[link.index("-o"):link.index("-o")] = objects
    if os.path.exists(obj):
        try:
            _run(link, cwd)
            counts["hits"] += 1
            return True
        except subprocess.CalledProcessError:
            counts["rebuilt"] += 1  # a broken object (truncated, another compiler's): made again
    # The program is kept beside its object (``<key>.cpp``): what an object is, for people.
    partial = f"{obj[:-2]}.{os.getpid()}"
    with open(f"{partial}.cpp", "w") as f:
        f.write(glue.code)
    _run([*compile_words, "-c", f"{partial}.cpp", "-o", f"{partial}.o"], cwd)
    os.replace(f"{partial}.cpp", f"{obj[:-2]}.cpp")
    os.replace(f"{partial}.o", obj)  # others see it whole or not at all
    counts["compiled"] += 1
    _run(link, cwd)
    return True
