"""The plan launcher's direct cuBLASLt matmul (eagerc/codegen/triton/plan_launcher/lt_matmul.cpp)
on a machine without a GPU: the launcher runs mm and addmm plans with a stand-in cuBLASLt
(tests/data/plan_launcher/fake_cublaslt.c, loaded under cuBLASLt's soname) that computes
what cuBLASLt defines on host memory. The layouts, transposes, bias epilogue and scalars
the launcher passes must give torch's mm/addmm; a call it does not serve goes to the shim."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eagerc.codegen.triton import plan_build
from tests.test_launch_plan import _link, _run, launcher  # noqa: F401  (launcher: a fixture)

DATA = Path(__file__).parent / "data" / "plan_launcher"
# A CUDA build of torch has the real cuBLASLt in the process, which the launcher finds first
# (tests/test_gpu_lt_matmul.py runs it there); the header check below runs anywhere.
needs_stand_in = pytest.mark.skipif(shutil.which("gcc") is None or torch.version.cuda is not None,
                                    reason="needs gcc and a torch without CUDA's cuBLASLt")

# mm(mat1, mat2) and addmm(bias, mat1, mat2, beta, alpha) into a row-major (m, n) buffer,
# as launch_plan.py writes a wrapper's steps (on host memory: this machine has no GPU).
MM_PLAN = """eagerc-launch-plan 1
inputs 2
slots 3
ints 0
doubles 0
device 0
alloc 2 float32 cpu 0 2 z:0:0 z:1:1 z:1:1 ci:1
extern aoti_torch_cuda_mm_out 3 h:2 h:0 h:1
out 0 2
"""


def _addmm_plan(beta: float, alpha: float) -> str:
    return f"""eagerc-launch-plan 1
inputs 3
slots 4
ints 0
doubles 0
device 0
alloc 3 float32 cpu 0 2 z:1:0 z:2:1 z:2:1 ci:1
extern aoti_torch_cuda_addmm_out 6 h:3 h:0 h:1 h:2 d:cd:{beta!r} d:cd:{alpha!r}
out 0 3
"""


@pytest.fixture(scope="module")
def fake_lt(tmp_path_factory):
    """The stand-in, in the process under cuBLASLt's soname (before any launcher looks)."""
    path = tmp_path_factory.mktemp("fake_lt") / "libcublasLt.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcublasLt.so.13",
                    str(DATA / "fake_cublaslt.c"), "-o", str(path)], check=True, capture_output=True)
    return ctypes.CDLL(str(path))


_TF32 = {"allowed": 0}
_PRECISION = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: _TF32["allowed"])


def _library(tmp_path, launcher, fake_lt, plan, offered=True):
    lib = _link(tmp_path, launcher, plan)
    if offered:  # what csrc/matmul_precision.cpp does on load
        lib.eagerc_set_matmul_precision(ctypes.cast(_PRECISION, ctypes.c_void_p))
    for name in ("fake_lt_matmuls", "fake_lt_heuristics", "fake_lt_status"):
        ctypes.c_int.in_dll(fake_lt, name).value = 0
    ctypes.c_size_t.in_dll(fake_lt, "fake_lt_workspace").value = 0
    ctypes.c_char.in_dll(lib, "fake_extern").value = 0
    return lib


def _counts(lib, fake_lt):
    return (ctypes.c_int.in_dll(fake_lt, "fake_lt_matmuls").value,
            ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_extern"))).decode())


def _inputs():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 3, generator=g)
    return {"row-major": (a, torch.randn(3, 4, generator=g)),
            "transposed": (torch.randn(3, 5, generator=g).t(), torch.randn(4, 3, generator=g).t()),
            "one row": (torch.randn(1, 3, generator=g), torch.randn(3, 4, generator=g)),
            "padded rows": (torch.randn(5, 8, generator=g)[:, :3], torch.randn(3, 6, generator=g)[:, :4])}


@needs_stand_in
@pytest.mark.parametrize("case", list(_inputs()))
def test_mm_is_one_cublaslt_call_and_equals_torchs(tmp_path, launcher, fake_lt, case):
    a, b = _inputs()[case]
    lib = _library(tmp_path, launcher, fake_lt, MM_PLAN)
    (out,) = _run(lib, [a, b], 1, 0, borrowed=True)
    torch.testing.assert_close(out, torch.mm(a, b))
    assert _counts(lib, fake_lt) == (1, "")  # cuBLASLt, not the shim
    assert ctypes.c_int.in_dll(fake_lt, "fake_lt_compute").value == 68  # CUBLAS_COMPUTE_32F


@needs_stand_in
def test_addmm_takes_the_bias_epilogue_and_alpha(tmp_path, launcher, fake_lt):
    a, b = _inputs()["transposed"]
    bias = torch.randn(4)
    for self in (bias, bias.expand(5, 4)):  # a row bias, or its expansion
        lib = _library(tmp_path, launcher, fake_lt, _addmm_plan(1.0, 2.5))
        (out,) = _run(lib, [self, a, b], 1, 0, borrowed=True)
        torch.testing.assert_close(out, torch.addmm(self, a, b, alpha=2.5))
        assert _counts(lib, fake_lt) == (1, "")


@needs_stand_in
def test_descriptors_and_algorithm_are_made_once_per_problem(tmp_path, launcher, fake_lt):
    lib = _library(tmp_path, launcher, fake_lt, MM_PLAN)
    for a, b in [_inputs()["row-major"]] * 3 + [_inputs()["transposed"]]:
        (out,) = _run(lib, [a, b], 1, 0, borrowed=True)
        torch.testing.assert_close(out, torch.mm(a, b))
    assert ctypes.c_int.in_dll(fake_lt, "fake_lt_matmuls").value == 4
    assert ctypes.c_int.in_dll(fake_lt, "fake_lt_heuristics").value == 2  # two problems
    assert ctypes.c_size_t.in_dll(fake_lt, "fake_lt_max_workspace").value == 1 << 20  # ATen's default limit
    assert list((ctypes.c_uint32 * 4).in_dll(fake_lt, "fake_lt_alignments")) == [16] * 4


@needs_stand_in
def test_tf32_is_read_at_each_call_and_a_workspace_is_allocated(tmp_path, launcher, fake_lt):
    lib = _library(tmp_path, launcher, fake_lt, MM_PLAN)
    ctypes.c_size_t.in_dll(fake_lt, "fake_lt_workspace").value = 4096
    a, b = _inputs()["row-major"]
    try:
        _TF32["allowed"] = 1
        _run(lib, [a, b], 1, 0, borrowed=True)
        assert ctypes.c_int.in_dll(fake_lt, "fake_lt_compute").value == 77  # CUBLAS_COMPUTE_32F_FAST_TF32
    finally:
        _TF32["allowed"] = 0
    assert ctypes.c_size_t.in_dll(fake_lt, "fake_lt_workspace_given").value == 4096
    _run(lib, [a, b], 1, 0, borrowed=True)
    assert ctypes.c_int.in_dll(fake_lt, "fake_lt_compute").value == 68
    assert ctypes.c_int.in_dll(fake_lt, "fake_lt_heuristics").value == 2  # TF32 is part of the problem


def _shim_cases():
    a, b = _inputs()["row-major"]
    bias = torch.randn(4)
    return {
        "beta is not 1": (_addmm_plan(0.5, 1.0), [bias, a, b]),
        "a full self": (_addmm_plan(1.0, 1.0), [torch.randn(5, 4), a, b]),
        "float64": (MM_PLAN, [a.double(), b.double()]),
        "strided columns": (MM_PLAN, [torch.randn(5, 6)[:, ::2], b]),
        "empty inner dimension": (MM_PLAN, [torch.randn(5, 0), torch.randn(0, 4)]),
        "inner dimension 1": (MM_PLAN, [torch.randn(5, 1), torch.randn(1, 4)]),
        "one column": (MM_PLAN, [a, torch.randn(3, 1)]),  # ATen keeps both off cuBLASLt too
    }


@needs_stand_in
@pytest.mark.parametrize("case", list(_shim_cases()))
def test_a_call_it_does_not_serve_goes_to_the_shim(tmp_path, launcher, fake_lt, case):
    plan, inputs = _shim_cases()[case]
    lib = _library(tmp_path, launcher, fake_lt, plan)
    _run(lib, inputs, 1, 0, borrowed=True)
    assert _counts(lib, fake_lt)[0] == 0 and _counts(lib, fake_lt)[1] in ("mm_out", "addmm_out")


@needs_stand_in
def test_without_the_loaders_offer_or_on_a_failed_status_the_shim_serves(tmp_path, launcher, fake_lt):
    a, b = _inputs()["row-major"]
    lib = _library(tmp_path, launcher, fake_lt, MM_PLAN, offered=False)  # EAGERC_GPU_CUBLASLT=0
    _run(lib, [a, b], 1, 0, borrowed=True)
    assert _counts(lib, fake_lt) == (0, "mm_out")
    lib = _library(tmp_path, launcher, fake_lt, MM_PLAN)
    ctypes.c_int.in_dll(fake_lt, "fake_lt_status").value = 13  # CUBLAS_STATUS_EXECUTION_FAILED
    _run(lib, [a, b], 1, 0, borrowed=True)
    assert _counts(lib, fake_lt) == (0, "mm_out")


# What lt_matmul.cpp declares, by cublasLt.h's names.
_HEADER_NAMES = {"kR32F": "CUDA_R_32F", "kCompute32F": "CUBLAS_COMPUTE_32F",
                 "kCompute32FFastTF32": "CUBLAS_COMPUTE_32F_FAST_TF32", "kOpN": "CUBLAS_OP_N",
                 "kOpT": "CUBLAS_OP_T", "kDescTransA": "CUBLASLT_MATMUL_DESC_TRANSA",
                 "kDescTransB": "CUBLASLT_MATMUL_DESC_TRANSB", "kDescEpilogue": "CUBLASLT_MATMUL_DESC_EPILOGUE",
                 "kDescBiasPointer": "CUBLASLT_MATMUL_DESC_BIAS_POINTER",
                 "kEpilogueDefault": "CUBLASLT_EPILOGUE_DEFAULT", "kEpilogueBias": "CUBLASLT_EPILOGUE_BIAS",
                 "kPrefMaxWorkspace": "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES",
                 "kPrefAlignA": "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES"}


def _cublaslt_include() -> str | None:
    roots = [os.environ.get("CUDA_HOME", "/usr/local/cuda")]
    roots += [os.path.join(p, "nvidia") for p in sys.path if os.path.isdir(os.path.join(p, "nvidia"))]
    for root in roots:
        for directory, _, files in os.walk(root):
            if "cublasLt.h" in files:
                return directory
    return None


def test_the_declared_constants_are_cublaslts(tmp_path):
    """Where a cuBLASLt header is installed (the GPU machine), its values and struct layout."""
    include = _cublaslt_include()
    if include is None:
        pytest.skip("no cublasLt.h on this machine")
    source = (Path(plan_build.LAUNCHER_DIR) / "lt_matmul.cpp").read_text()
    ours = dict(re.findall(r"\b(k\w+) = (\d+)", source))
    assert set(_HEADER_NAMES) <= set(ours)
    checks = [f"static_assert({_HEADER_NAMES[k]} == {ours[k]}, \"{k}\");" for k in _HEADER_NAMES]
    checks += ["static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, \"heuristic size\");",
               "static_assert(offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) == 64, \"workspace\");",
               "static_assert(offsetof(cublasLtMatmulHeuristicResult_t, state) == 72, \"state\");",
               "static_assert(sizeof(cublasLtMatmulAlgo_t) == 64, \"algo\");"]
    cuda_include = [d for d in (os.path.join(os.path.dirname(include), "..", "cuda_runtime", "include"),
                                os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/include") if os.path.isdir(d)]
    check = tmp_path / "check.cpp"
    check.write_text("#include <cstddef>\n#include <cublasLt.h>\n" + "\n".join(checks) + "\n")
    flags = [f"-I{include}"] + [f"-I{d}" for d in cuda_include]
    result = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *flags, str(check)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
