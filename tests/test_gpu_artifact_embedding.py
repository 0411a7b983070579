"""GPU artifacts are self-contained: the cubins Inductor's wrapper would load by file path
are linked into the library instead (eagerc/codegen/triton/generator.py, embed_cubins).

Runs without a GPU: a wrapper-shaped C++ file whose loadKernel records the bytes it is
given is rewritten, compiled into a shared library with the system C++ compiler, the
"cubin" files are deleted, and the library must still hand back their exact bytes.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from eagerc.refusals import CompileError
from eagerc.codegen.triton.generator import embed_cubins

WRAPPER = """
#include <cstring>
#include <string>
// Stand-ins for Inductor's two loadKernel overloads (file path, and bytes in memory).
static const void* g_loaded[2];
static int g_count = 0;
static inline int loadKernel(std::string path, const std::string& name, unsigned shm,
                             const char* cubin_dir) { return -1; }
static inline int loadKernel(const void* start, const std::string& name, unsigned shm) {
  g_loaded[g_count++] = start;
  return 0;
}
static const char* cubin_dir_ = nullptr;
extern "C" int load_all() {
  int a = loadKernel("PATH_A", "triton_poi_fused_0", 0, cubin_dir_);
  int b = loadKernel( "PATH_B" , "triton_red_fused_1", 1024,cubin_dir_);
  return a + b;
}
extern "C" int loaded_byte(int kernel, int offset) {
  return static_cast<const unsigned char*>(g_loaded[kernel])[offset];
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_cubins_are_linked_into_the_library(tmp_path):
    blobs = {"A": bytes(range(256)) * 3, "B": b"\x7fELF" + bytes(1000)}
    code = "#include <cstddef>\n" + WRAPPER
    for name, data in blobs.items():
        path = tmp_path / f"kernel_{name}.cubin"
        path.write_bytes(data)
        code = code.replace(f"PATH_{name}", str(path))
    embedded = embed_cubins(code)
    assert 'loadKernel("' not in embedded  # no load by file path is left
    assert "cubin_dir_)" not in embedded
    source, library = tmp_path / "wrapper.cpp", tmp_path / "wrapper.so"
    source.write_text(embedded)
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", str(source), "-o", str(library)], check=True)
    for name in blobs:
        (tmp_path / f"kernel_{name}.cubin").unlink()  # Inductor's temporary files are gone
    lib = ctypes.CDLL(str(library))
    assert lib.load_all() == 0  # both loads took the in-memory overload
    for k, data in enumerate(blobs.values()):
        got = bytes(lib.loaded_byte(k, i) for i in range(len(data)))
        assert got == data
    assert b".cubin" not in library.read_bytes()


def test_a_load_in_an_unknown_form_is_refused():
    with pytest.raises(CompileError, match="cannot embed"):
        embed_cubins('#include <x>\nk = loadKernel(path_var, "k", 0, cubin_dir_);\n')


def test_cpu_code_is_unchanged():
    code = '#include <x>\nvoid f() { aoti_torch_cpu_mm_out(a, b, c); }\n'
    assert embed_cubins(code) == code
