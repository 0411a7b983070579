"""GPU wrappers make a CUDA context current after their device guard
(eagerc/codegen/triton/gpu_context.py).

Runs without a GPU: an entry function shaped like Inductor's JIT GPU wrapper (its device
guard, then a launch) is compiled with the system C++ compiler against stand-ins for the
CUDA calls, which record what was called, and run as from a thread with and without a
current context.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from eagerc.codegen.triton.gpu_context import make_context_current

# Stand-ins for the CUDA types and calls the inserted check uses.
STANDINS = """
#include <cstdint>
typedef void* CUcontext; typedef int CUresult; const CUresult CUDA_SUCCESS = 0;
static void* g_context = nullptr; static int g_set_device = -1; static int g_guard = -1;
static int g_launched_with_context = 0;
static CUresult cuCtxGetCurrent(CUcontext* c) { *c = g_context; return CUDA_SUCCESS; }
static int cudaGetDevice(int* d) { *d = g_guard < 0 ? 0 : g_guard; return 0; }
static int cudaSetDevice(int d) { g_set_device = d; g_context = &g_set_device; return 0; }
static int cudaFree(void*) { return 0; }
struct AOTICudaGuard { explicit AOTICudaGuard(int i) { g_guard = i; } void set_index(int i) { g_guard = i; } };
static void launchKernel() { g_launched_with_context += g_context != nullptr; }
"""

# The lines around a launch as torch 2.11's JIT GPU wrapper emits them.
ENTRY = """
extern "C" int entry(int has_context) {
  g_context = has_context ? reinterpret_cast<void*>(1) : nullptr; g_set_device = -1;
  g_launched_with_context = 0;
  AOTICudaGuard device_guard(1);
  launchKernel();
  device_guard.set_index(0);
  launchKernel();
  return g_launched_with_context * 100 + g_set_device + 1;
}
"""


def _entry(tmp_path, source: str, name: str):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, lib = tmp_path / f"{name}.cpp", tmp_path / f"{name}.so"
    src.write_text(STANDINS + source)
    subprocess.run([cxx, "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(lib)).entry


def test_unchanged_wrapper_launches_without_a_context(tmp_path):
    # The defect: nothing makes a context current on a fresh thread.
    assert _entry(tmp_path, ENTRY, "before")(0) == 0


def test_thread_without_a_context_gets_the_guards_device(tmp_path):
    entry = _entry(tmp_path, make_context_current(ENTRY), "after")
    # Both launches find a context; the guard's device (1) was selected, once.
    assert entry(0) == 2 * 100 + 1 + 1
    # A thread that has one is left alone: no cudaSetDevice.
    assert entry(1) == 2 * 100 + 0


def test_check_follows_every_device_guard():
    fixed = make_context_current(ENTRY)
    assert fixed.count("cuCtxGetCurrent") == 2
    assert fixed.index("AOTICudaGuard device_guard(1);") < fixed.index("cuCtxGetCurrent")
    assert make_context_current("void f() { launch(); }") == "void f() { launch(); }"
