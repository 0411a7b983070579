"""Float scalars reach Triton kernels unrounded (eagerc/codegen/triton/gpu_launch_types.py).

Runs without a GPU: a launcher shaped like the one Inductor's C++ wrapper generated on the
H100 for ``add(x, y, alpha=<float>)`` (parameters declared int64_t, the body copying one
into a double kernel argument) is compiled with the system C++ compiler, before and after
the rewrite, and called with alpha=0.5.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from eagerc.codegen.triton.gpu_launch_types import fix_float_launch_params

# Lines as Inductor generated them (torch 2.11), stand-ins for the CUDA types.
LAUNCHER = """
#include <cstdint>
static double g_kernel_alpha = -1; static int32_t g_kernel_numel = -1;
static inline void launchKernel(void** args) {
  g_kernel_alpha = *static_cast<double*>(args[2]); g_kernel_numel = *static_cast<int32_t*>(args[3]);
}
template <typename in_ptr0_type_, typename out_ptr0_type_>
static inline void call_triton_poi_fused_0(
    const in_ptr0_type_& in_ptr0,
    const out_ptr0_type_& out_ptr0,
    int64_t ks0,
    int64_t xnumel,
    int32_t device_idx_
){
    long var_0 = in_ptr0;
    long var_1 = out_ptr0;
    double var_2 = ks0;
    int32_t var_3 = xnumel;
    void* kernel_args_[] = {&var_0, &var_1, &var_2, &var_3};
    launchKernel(kernel_args_);
}
template <typename in_ptr0_type_>
static inline void call_triton_poi_fused_1(
    const in_ptr0_type_& in_ptr0,
    int64_t ks0,
    int32_t device_idx_
){
    int64_t var_0 = ks0;
}
extern "C" double launch(double alpha, int64_t numel) {
  double zuf0 = alpha;
  call_triton_poi_fused_0(1L, 2L, zuf0, numel, 0);
  return g_kernel_alpha + 0 * g_kernel_numel;
}
extern "C" int32_t launched_numel() { return g_kernel_numel; }
"""


def _build(tmp_path, source: str, name: str):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, lib = tmp_path / f"{name}.cpp", tmp_path / f"{name}.so"
    src.write_text(source)
    subprocess.run([cxx, "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True,
                   capture_output=True, text=True)
    library = ctypes.CDLL(str(lib))
    library.launch.restype = ctypes.c_double
    library.launch.argtypes = [ctypes.c_double, ctypes.c_int64]
    library.launched_numel.restype = ctypes.c_int32
    return library


def test_inductor_launcher_truncates_float_scalars(tmp_path):
    # The defect the rewrite exists for; if Inductor fixes it, this says so.
    assert _build(tmp_path, LAUNCHER, "before").launch(0.5, 4096) == 0.0


def test_float_launch_params_become_double(tmp_path):
    fixed = fix_float_launch_params(LAUNCHER)
    library = _build(tmp_path, fixed, "after")
    assert library.launch(0.5, 4096) == 0.5
    assert library.launch(-1.25, 7) == -1.25
    assert library.launched_numel() == 7          # integer sizes keep their type
    assert "    double ks0,\n    int64_t xnumel," in fixed
    # A launcher whose parameter stays an integer kernel argument is left alone.
    second = fixed[fixed.index("call_triton_poi_fused_1("):]
    assert "    int64_t ks0,\n" in second


def test_code_without_launchers_is_unchanged():
    code = "void inductor_entry_impl() { double x = y; }\n"
    assert fix_float_launch_params(code) == code
