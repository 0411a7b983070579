"""eagerc's own header for the C++ wrappers Inductor generates (the glue code), precompiled
once per machine, compiler and flag set, and force-included in place of Inductor's.

Why: Inductor's JIT wrapper header (``cpp_wrapper/cuda.h`` or ``cpu.h`` under
TORCH_INDUCTOR_PRECOMPILE_HEADERS) also pulls in pybind11, torch's Python bindings and ATen's
CUDA headers. Measured with g++ on a generated wrapper: loading its precompiled header (~110
MB) costs ~0.25 s of every build, and the Python binding Inductor appends ~0.07 s more. The
generated code needs only the AOTI runtime helpers and C shims; eagerc calls the library
through ``eagerc_entry``, never through Python. With this header the same wrapper builds in
~60% of the time. A wrapper this header cannot build (it uses something left out) is built
as before: slim_build says so and the caller builds the original command.

What a wrapper needs beyond what every wrapper uses is its code generator's
(Codegen.wrapper_headers: a GPU wrapper's CUDA headers). A code generator may have a lean
header tried first (Codegen.lean_prelude: GPU wrappers' declares what they call without any
torch C++ header, 30-40% less g++ again); this header is its fallback.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
import tempfile

# What every generated wrapper uses (a code generator adds what its devices need:
# Codegen.wrapper_headers): RAII tensor handles and error checks (utils.h), the
# C shims, device helpers, scalar_to_tensor, generic math, align(); Python.h only for the
# import stub below (Inductor imports the built library as a module).
#
# The error check of every C shim call (AOTI_TORCH_ERROR_CODE_CHECK) calls torch's
# throw_exception, a static function that formats its message through a stringstream:
# each unit that calls it compiles and optimises its own copy of that stringstream code,
# ~0.045 s of clang's ~0.2 s on an abs kernel (CPU seconds, 2-core dev machine). The
# header's definition is renamed out of the way (never called, so never compiled) and
# this one, the same exception with the same message built by snprintf, takes its name.
#
# RAIIAtenTensorHandle, every wrapper's tensor handle, holds a
# std::unique_ptr<AtenTensorOpaque, void (*)(void*)>: libstdc++ builds it of a tuple, ~45
# one-line functions (tuple heads, forwards, moves) that every unit emits and the -O3
# inliner works through, ~15% of clang's instructions on an abs kernel (callgrind: 668 M ->
# 565 M). The specialization below is that unique_ptr written plainly: the standard's
# reset/release/move/destroy semantics, libstdc++'s layout (deleter, then pointer), hidden
# (never bound to another library's copy).
_COMMON = """\
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <Python.h>
#include <cstdio>
#include <stdexcept>
#include <torch/headeronly/macros/Macros.h>
#if __has_include(<torch/headeronly/util/shim_utils.h>)
#define throw_exception eagerc_unused_throw_exception
#include <torch/headeronly/util/shim_utils.h>
#undef throw_exception
HIDDEN_NAMESPACE_BEGIN(torch, headeronly, detail)
[[noreturn]] __attribute__((noinline, cold)) static void throw_exception(const char* call, const char* file,
                                                                         int64_t line) {
  char message[4096];  // a shim call's text, the file, the line: far below (else cut there)
  std::snprintf(message, sizeof message, "%s API call failed at %s, line %lld", call, file,
                static_cast<long long>(line));
  throw std::runtime_error(message);
}
HIDDEN_NAMESPACE_END(torch, headeronly, detail)
#endif
#include <memory>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#if defined(__GLIBCXX__)
namespace std {
template <>
class __attribute__((visibility("hidden"))) unique_ptr<AtenTensorOpaque, void (*)(void*)> {
 public:
  using pointer = AtenTensorOpaque*;
  using element_type = AtenTensorOpaque;
  using deleter_type = void (*)(void*);
  unique_ptr(pointer p, deleter_type d) noexcept : deleter_(d), ptr_(p) {}
  unique_ptr(unique_ptr&& other) noexcept : deleter_(other.deleter_), ptr_(other.release()) {}
  unique_ptr& operator=(unique_ptr&& other) noexcept {
    reset(other.release());
    deleter_ = other.deleter_;
    return *this;
  }
  unique_ptr& operator=(nullptr_t) noexcept {
    reset();
    return *this;
  }
  unique_ptr(const unique_ptr&) = delete;
  unique_ptr& operator=(const unique_ptr&) = delete;
  ~unique_ptr() {
    if (ptr_ != nullptr) deleter_(ptr_);
  }
  pointer get() const noexcept { return ptr_; }
  deleter_type& get_deleter() noexcept { return deleter_; }
  const deleter_type& get_deleter() const noexcept { return deleter_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  pointer release() noexcept {
    pointer p = ptr_;
    ptr_ = nullptr;
    return p;
  }
  void reset(pointer p = pointer()) noexcept {
    pointer old = ptr_;
    ptr_ = p;
    if (old != nullptr) deleter_(old);
  }
  void swap(unique_ptr& other) noexcept {
    std::swap(deleter_, other.deleter_);
    std::swap(ptr_, other.ptr_);
  }

 private:
  deleter_type deleter_;  // libstdc++'s order (its tuple holds the deleter first)
  pointer ptr_;
};
}  // namespace std
#endif
#include <torch/csrc/inductor/aoti_runtime/device_utils.h>
#include <torch/csrc/inductor/aoti_runtime/utils.h>
using namespace torch::aot_inductor;
#include <c10/util/generic_math.h>
#include <torch/csrc/inductor/aoti_runtime/scalar_to_tensor.h>
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h>
[[maybe_unused]] inline int64_t align(int64_t nbytes) { return (nbytes + 64 - 1) & -64; }
"""

# The header line a generated wrapper starts with, one per device it computes on.
_WRAPPER_INCLUDE = re.compile(r"^[ \t]*#include <torch/csrc/inductor/cpp_wrapper/(\w+)\.h>[ \t]*\n", re.M)
_FORCED_INCLUDE = re.compile(r"(?<!\S)-include\s+\S+")
_PRECOMPILE_DEFINE = re.compile(r"(?<!\S)-D\s*TORCH_INDUCTOR_PRECOMPILE_HEADERS(?!\S)")
# Link-only words of a compile-and-link command (a precompiled header is compiled only).
_LINK_WORD = re.compile(r"^(-l\S*|-L\S*|-Wl,\S*|-shared|-c|\S+\.(so|o|a)(\.\d+)*)$")

# Replaces the Python binding Inductor appends (its argument parsing and tensor-list
# packing cost ~0.07 s of g++): the module still imports, and its entry says where the
# library is called from instead.
MINIMAL_BINDING = """
// eagerc calls this library through eagerc_entry (csrc/artifact.cpp); Inductor only imports it.
static PyObject* eagerc_not_from_python(PyObject*, PyObject*) {{
  PyErr_SetString(PyExc_RuntimeError, "eagerc's kernel holder calls this library, Python does not");
  return nullptr;
}}
static PyMethodDef eagerc_methods[] = {{
    {{"{entry_func}", eagerc_not_from_python, METH_VARARGS, ""}}, {{nullptr, nullptr, 0, nullptr}}}};
static struct PyModuleDef eagerc_module = {{PyModuleDef_HEAD_INIT, "{entry_func}", nullptr, -1, eagerc_methods}};
PyMODINIT_FUNC PyInit_{entry_func}(void) {{ return PyModule_Create(&eagerc_module); }}
"""

log = logging.getLogger("eagerc")

# Builds of this process that used the prelude, and those that fell back to Inductor's
# header (tests read them: a silent fallback would only cost time).
counts = {"lean": 0, "slim": 0, "fallback": 0}
_unusable: set = set()  # what built_once could not build in this process


def prelude_text(devices, codegen, lean: bool = False) -> str:
    """The header for a wrapper of `codegen`'s code that computes on `devices`: with `lean`,
    the code generator's lean header (Codegen.lean_prelude), else this module's."""
    if lean:
        return codegen.lean_prelude().text()
    headers = codegen.wrapper_headers()
    return _COMMON + "".join(headers[d] for d in sorted(devices))


def slim_source(code: str, codegen):
    """(`code` without its cpp_wrapper header lines, the devices they named), or None when
    it has none or names a device `codegen`'s prelude does not cover."""
    devices = set(_WRAPPER_INCLUDE.findall(code))
    if not devices or not devices <= set(codegen.wrapper_headers()):
        return None
    return _WRAPPER_INCLUDE.sub("", code), devices


@contextlib.contextmanager
def minimal_python_binding():
    """While active, Inductor appends MINIMAL_BINDING to C++ wrappers instead of its own."""
    from torch._inductor.codecache import CppWrapperCodeCache

    if "{entry_func}" not in getattr(CppWrapperCodeCache, "suffix_template", ""):
        yield  # a torch whose binding is built otherwise: left as it is
        return
    original = CppWrapperCodeCache.suffix_template
    CppWrapperCodeCache.suffix_template = MINIMAL_BINDING
    try:
        yield
    finally:
        CppWrapperCodeCache.suffix_template = original


def _compile_flags(command: str, source: str) -> list:
    """The compile flags of `command` (compiler first): no source, output, forced include
    or link words, and no TORCH_INDUCTOR_PRECOMPILE_HEADERS (what it adds is Inductor's)."""
    words = _PRECOMPILE_DEFINE.sub("", _FORCED_INCLUDE.sub("", command)).split()
    flags, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "-o":
            skip = True
        elif word != source and not _LINK_WORD.match(word):
            flags.append(word)
    return flags


def link_words(command: str) -> list:
    """The libraries and linker options of a compile-and-link command (_LINK_WORD's, the
    output and the mode words -shared and -c aside): what _compile_flags leaves out."""
    words, out, skip = command.split(), [], False
    for word in words[1:]:
        if skip:
            skip = False
        elif word == "-o":
            skip = True
        elif _LINK_WORD.match(word) and word not in ("-shared", "-c") and not word.endswith(".o"):
            out.append(word)
    return out


def _header_dir() -> str:
    """Inductor's machine-wide directory of precompiled headers (they outlive its caches,
    as ours should), or one in the temporary directory."""
    try:
        from torch._inductor import codecache

        return codecache._HEADER_DIR
    except (ImportError, AttributeError):
        return os.path.join(tempfile.gettempdir(), "eagerc_precompiled_headers")


def built_once(name: str, build) -> str | None:
    """Path of `name` in the machine-wide build directory (_header_dir), made on first use by
    `build(partial)` (which writes a temporary path) under a file lock and then renamed, so
    other processes see it whole or not at all; None where it cannot be built (remembered
    for this process). Precompiled headers and the plan launcher (plan_build) are built so."""
    from torch.utils._filelock import FileLock

    if name in _unusable:
        return None
    directory = _header_dir()
    path = os.path.join(directory, name)
    if os.path.exists(path):
        return path
    try:
        os.makedirs(os.path.join(directory, "locks"), exist_ok=True)
        with FileLock(os.path.join(directory, "locks", f"{name}.lock"), timeout=600):
            if not os.path.exists(path):
                partial = f"{path}.{os.getpid()}.partial"
                build(partial)
                os.replace(partial, path)
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("eagerc: %s could not be built: %s", name, getattr(e, "stderr", e))
        _unusable.add(name)
        return None
    return path


def precompiled_prelude(flags: list, devices, codegen, lean: bool = False) -> str | None:
    """Path of the prelude header (prelude_text's) whose precompiled form (path + ".gch",
    built_once) matches `flags`; None where it cannot be built."""
    import torch

    from eagerc.codegen.cpp.toolchain import cxx_compiler

    text = prelude_text(devices, codegen, lean)
    key = hashlib.sha256(repr((text, flags, cxx_compiler(), torch.__version__,
                               getattr(torch.version, "git_version", ""))).encode()).hexdigest()[:24]
    header = os.path.join(_header_dir(), f"eagerc_glue_{key}.h")

    def build(partial: str) -> None:
        with open(header, "w") as f:
            f.write(text)
        subprocess.run([*flags, "-x", "c++-header", header, "-o", partial],
                       check=True, capture_output=True, timeout=600)

    return header if built_once(os.path.basename(header) + ".gch", build) else None


def source_file(command: str):
    """The C++ source a compile command builds (its first `.cpp` word), or None."""
    return next((w for w in command.split() if w.endswith(".cpp")), None)


def slim_build(builder, command: str, codegen) -> bool:
    """Build `builder`, a wrapper of `codegen`'s code, as `command` says, but with the
    prelude force-included instead of Inductor's header: the code generator's lean header
    where the wrapper fits it, else (or where that build fails) this module's; False
    (nothing built) where neither is possible or builds."""
    from eagerc import _config

    mode = _config.glue_prelude()
    if mode == "0":  # Inductor's header (A/B timing); "full": this module's header only
        return False
    forced = _FORCED_INCLUDE.search(command)
    source = source_file(command)
    if forced is None or source is None or not os.path.exists(source):
        return False
    with open(source) as f:
        slim = slim_source(f.read(), codegen)
    if slim is None:
        return False
    code, devices = slim
    attempts = [(False, code)]
    lean_prelude = codegen.lean_prelude()
    if mode != "full" and lean_prelude is not None and lean_prelude.fits(code, devices):
        attempts.insert(0, (True, lean_prelude.without_file_loader(code)))
    original = builder.get_command_line
    slim_path = source[:-len(".cpp")] + ".eagerc.cpp"
    for lean, text in attempts:
        header = precompiled_prelude(_compile_flags(command, source), devices, codegen, lean)
        if header is None:
            continue
        with open(slim_path, "w") as f:
            f.write(text)
        line = _PRECOMPILE_DEFINE.sub("", command.replace(forced.group(0), f"-include {header}"))
        line = " ".join(slim_path if w == source else w for w in line.split())
        builder.get_command_line = lambda: line
        try:
            builder.build()
        except Exception as e:  # noqa: BLE001 - the next header decides
            builder.get_command_line = original
            # Costs a compile each time: say why (the compiler's first error lines).
            log.debug("eagerc: %s wrapper header could not build %s: %s", "lean" if lean else "full",
                      source, "\n".join(str(e).splitlines()[-12:]))
            continue
        counts["lean" if lean else "slim"] += 1
        return True
    counts["fallback"] += 1
    return False
