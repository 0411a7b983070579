"""A lean header for GPU wrappers: eagerc's own declarations of the few C shim functions a
wrapper calls to launch Triton kernels and of the helpers it names, the prototypes of the
CUDA extern calls (copied from torch's generated c_shim_cuda.h, plain C), and nothing of
torch's C++ headers.

Why: on glue_prelude's header a GPU wrapper still pays for AOTI's ``shim.h``, which pulls
torch's header-only C++ (BFloat16, Half, complex, Float8 types: ~0.45 s of g++ to parse,
~60 MB precompiled), and for the generated file-path ``loadKernel`` overload's
``std::filesystem`` (eagerc embeds every cubin, so it is dead code). g++ CPU time of
generated H100 wrappers on the dev machine: softmax 0.24-0.29 s against 0.36-0.41 s on
glue_prelude's header, mm 0.17 against 0.27 s. On the H100, with every wrapper built by
g++, it takes a cold compile's median from 1.14 to 0.80 s per kernel (most wrappers are now
launch plans instead, launch_plan.py; the rest build on this header).

Only wrappers that `fits` accepts use it: every shim function they name is declared here
and they name nothing of torch's C++ API. Anything else builds on glue_prelude's header as
before, and a lean build that fails anyway falls back to it too. The shim functions are
torch's stable C ABI (extern "C", signatures as in ``aoti_torch/c/shim.h``); the helper
classes mirror the member functions of AOTI's RAII handles that generated code calls.
"""
from __future__ import annotations

import functools
import os
import re

# The cpp_wrapper headers (one per device a wrapper computes on) this header stands in for.
REPLACES = frozenset({"cuda"})
# Shim functions declared below; dtype and device-type getters are matched by prefix.
DECLARED = frozenset({
    "aoti_torch_empty_strided", "aoti_torch_get_data_ptr", "aoti_torch_get_sizes",
    "aoti_torch_get_strides", "aoti_torch_get_size", "aoti_torch_get_stride",
    "aoti_torch_get_storage_offset", "aoti_torch_delete_tensor_object",
    "aoti_torch__reinterpret_tensor", "aoti_torch_get_current_cuda_stream",
    "aoti_torch_create_cuda_guard", "aoti_torch_cuda_guard_set_index",
    "aoti_torch_delete_cuda_guard", "aoti_torch_create_cuda_stream_guard",
    "aoti_torch_delete_cuda_stream_guard"})
_GETTER = re.compile(r"aoti_torch_(dtype|device_type)_\w+$")
_DTYPES = ("float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "bfloat16",
           "float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8",
           "int16", "int32", "int64", "bool", "complex32", "complex64", "complex128")
_SHIM_NAME = re.compile(r"\baoti_torch_\w+")
# What only torch's headers define: a wrapper naming any of these is not lean.
_TORCH_CPP = re.compile(r"\b(c10|at|torch)::|\bArrayRefTensor\b|\bscalar_to_tensor\b|"
                        r"\bRAIIC10IValueHandle\b|\bRAIIAtenRecordFunctionHandle\b|\bMaybeOwning\w*|"
                        r"\bConstantHandle\b|\bassert_size_stride\b|\bconvert_arrayref\w*|"
                        r"\bthrow_exception\b|\bAOTI_RUNTIME_\w+|\bstd::filesystem\b")
# The generated overload of loadKernel that reads a cubin file (Inductor's JIT wrapper).
_FILE_LOADER = re.compile(r"static inline CUfunction loadKernel\(\s*std::string filePath")

# The device and stream guards generated GPU code names: RAII over the shims' guard calls (torch's
# own, in utils_cuda.h, come with cuda_runtime.h and the fp16/bf16/fp8 headers). Shared with
# glue_prelude's full header (FULL_PRELUDE_CUDA).
CUDA_GUARDS = """\
class AOTICudaGuard {
 public:
  explicit AOTICudaGuard(int32_t index) { AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_create_cuda_guard(index, &guard_)); }
  void set_index(int32_t index) { AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cuda_guard_set_index(guard_, index)); }
  ~AOTICudaGuard() { if (guard_ != nullptr) aoti_torch_delete_cuda_guard(guard_); }
  AOTICudaGuard(const AOTICudaGuard&) = delete;
  AOTICudaGuard& operator=(const AOTICudaGuard&) = delete;
 private:
  CUDAGuardHandle guard_ = nullptr;
};
class AOTICudaStreamGuard {
 public:
  AOTICudaStreamGuard(cudaStream_t stream, int32_t index) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_create_cuda_stream_guard(stream, index, &guard_));
  }
  ~AOTICudaStreamGuard() { if (guard_ != nullptr) aoti_torch_delete_cuda_stream_guard(guard_); }
  AOTICudaStreamGuard(const AOTICudaStreamGuard&) = delete;
  AOTICudaStreamGuard& operator=(const AOTICudaStreamGuard&) = delete;
 private:
  CUDAStreamGuardHandle guard_ = nullptr;
};
"""

# What glue_prelude's full header (codegen/cpp/glue_prelude.py, this header's fallback) adds
# for a GPU wrapper: the driver and runtime API (the generated code's loadKernel and
# launchKernel helpers call them), CUDA's C shims (cuBLAS, cuDNN and attention externs),
# and the device and stream guards the code names. torch's utils_cuda.h defines those two
# through cuda_runtime.h and the fp16/bf16/fp8 headers, which the host code never uses and
# which double the precompiled header (118 against ~60 MB): eagerc's are the same RAII
# wrappers over the same shim calls.
FULL_PRELUDE_CUDA = """\
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h>
""" + CUDA_GUARDS

_OWN = """\
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <Python.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
// eagerc's lean GPU wrapper header (eagerc/codegen/triton/lean_gpu_prelude.py).
extern "C" {
struct AtenTensorOpaque;
using AtenTensorHandle = AtenTensorOpaque*;
using AOTITorchError = int32_t;
struct CUDAGuardOpaque;
using CUDAGuardHandle = CUDAGuardOpaque*;
struct CUDAStreamGuardOpaque;
using CUDAStreamGuardHandle = CUDAStreamGuardOpaque*;
struct AtenGeneratorOpaque;
using AtenGeneratorHandle = AtenGeneratorOpaque*;
AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
    int32_t dtype, int32_t device_type, int32_t device_index, AtenTensorHandle* result);
AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** result);
AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** result);
AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** result);
AOTITorchError aoti_torch_get_size(AtenTensorHandle tensor, int64_t dim, int64_t* result);
AOTITorchError aoti_torch_get_stride(AtenTensorHandle tensor, int64_t dim, int64_t* result);
AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* result);
AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
    const int64_t* sizes, const int64_t* strides, int64_t storage_offset, AtenTensorHandle* result);
AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** result);
AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* result);
AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index);
AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index,
    CUDAStreamGuardHandle* result);
AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard);
int32_t aoti_torch_device_type_cpu();
int32_t aoti_torch_device_type_cuda();
// @extern-prototypes@
""" + "".join(f"int32_t aoti_torch_dtype_{d}();\n" for d in _DTYPES) + """\
}
#define AOTI_TORCH_SUCCESS 0
[[noreturn]] inline void eagerc_shim_failed(const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " API call failed at " + file + ", line " + std::to_string(line));
}
#define AOTI_TORCH_ERROR_CODE_CHECK(call) \\
  if ((call) != AOTI_TORCH_SUCCESS) { eagerc_shim_failed(#call, __FILE__, __LINE__); }
#define CACHE_TORCH_DTYPE(name) static auto cached_torch_dtype_##name = aoti_torch_dtype_##name()
#define CACHE_TORCH_DEVICE(name) static auto cached_torch_device_type_##name = aoti_torch_device_type_##name()
// Owns a tensor handle (the tensor is deleted with it), as AOTI's RAIIAtenTensorHandle.
class RAIIAtenTensorHandle {
 public:
  RAIIAtenTensorHandle() = default;
  RAIIAtenTensorHandle(AtenTensorHandle handle) : handle_(handle) {}
  RAIIAtenTensorHandle(const RAIIAtenTensorHandle&) = delete;
  RAIIAtenTensorHandle& operator=(const RAIIAtenTensorHandle&) = delete;
  RAIIAtenTensorHandle(RAIIAtenTensorHandle&& other) noexcept : handle_(other.release()) {}
  RAIIAtenTensorHandle& operator=(RAIIAtenTensorHandle&& other) noexcept {
    if (this != &other) { reset(); handle_ = other.release(); }
    return *this;
  }
  ~RAIIAtenTensorHandle() { reset(); }
  operator AtenTensorHandle() const { return handle_; }
  AtenTensorHandle get() const { return handle_; }
  AtenTensorHandle release() { AtenTensorHandle h = handle_; handle_ = nullptr; return h; }
  void reset() { if (handle_ != nullptr) aoti_torch_delete_tensor_object(handle_); handle_ = nullptr; }
  int64_t size(int64_t d) { int64_t v = 0; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_size(handle_, d, &v)); return v; }
  int64_t stride(int64_t d) { int64_t v = 0; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_stride(handle_, d, &v)); return v; }
  int64_t storage_offset() { int64_t v = 0; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_storage_offset(handle_, &v)); return v; }
  void* data_ptr() const { void* p = nullptr; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_data_ptr(handle_, &p)); return p; }
  int64_t* sizes() const { int64_t* p = nullptr; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_sizes(handle_, &p)); return p; }
  int64_t* strides() const { int64_t* p = nullptr; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_strides(handle_, &p)); return p; }
 private:
  AtenTensorHandle handle_ = nullptr;
};
inline std::vector<RAIIAtenTensorHandle> steal_from_raw_handles_to_raii_handles(AtenTensorHandle* handles, size_t n) {
  std::vector<RAIIAtenTensorHandle> owned;
  owned.reserve(n);
  for (size_t i = 0; i < n; ++i) { owned.emplace_back(handles[i]); handles[i] = nullptr; }
  return owned;
}
inline AtenTensorHandle reinterpret_tensor_wrapper(AtenTensorHandle self, int64_t ndim,
    const int64_t* sizes, const int64_t* strides, int64_t storage_offset) {
  AtenTensorHandle result = nullptr;
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch__reinterpret_tensor(self, ndim, sizes, strides, storage_offset, &result));
  return result;
}
inline void* get_data_ptr_wrapper(AtenTensorHandle tensor) {
  void* p = nullptr; AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_data_ptr(tensor, &p)); return p;
}
// A buffer reused as a view of another (`auto buf3 = wrap_with_raii_handle_if_needed(...)`).
inline RAIIAtenTensorHandle wrap_with_raii_handle_if_needed(AtenTensorHandle handle) { return RAIIAtenTensorHandle(handle); }
inline AtenTensorHandle unwrap_raii_handle_if_needed(const RAIIAtenTensorHandle& handle) { return handle.get(); }
template <class T>
T& temporary_reference(T&& t) { return t; }
// A kernel's global scratch memory: a 1-d tensor of `numel` elements kept in `owner`.
template <typename DevicePtr>
inline DevicePtr allocate_scratch_tensor(int64_t numel, int32_t dtype, int32_t device_type,
                                         int32_t device_index, RAIIAtenTensorHandle& owner) {
  if (numel <= 0) return 0;
  const int64_t size[] = {numel}, stride[] = {1};
  AtenTensorHandle handle = nullptr;
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(1, size, stride, dtype, device_type, device_index, &handle));
  owner = RAIIAtenTensorHandle(handle);
  return reinterpret_cast<DevicePtr>(owner.data_ptr());
}
[[maybe_unused]] inline int64_t align(int64_t nbytes) { return (nbytes + 64 - 1) & -64; }
""" + CUDA_GUARDS


# A CUDA extern's declaration in torch's generated c_shim_cuda.h (one line each), and the
# words its parameter lists may use here (the handle types are declared above).
_EXTERN_DECLARATION = re.compile(r"^AOTI_TORCH_EXPORT (AOTITorchError (aoti_torch_cuda_\w+)\(([^;]*)\);)$", re.M)
_PARAMETER_TYPE = re.compile(r"^(const )?(AtenTensorHandle|AtenGeneratorHandle|char|double|int32_t|int64_t)\**$")


@functools.cache
def _extern_declarations() -> dict:
    """{name: declaration} of the CUDA extern calls (cuBLAS, cuDNN, attention, ...) of this
    torch's c_shim_cuda.h: plain C prototypes, copied into the lean header so that a wrapper
    of extern calls builds on it too. Empty where the header is missing."""
    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc", "inductor",
                        "aoti_torch", "generated", "c_shim_cuda.h")
    try:
        with open(path) as f:
            header = f.read()
    except OSError:
        header = ""
    externs = {}
    for declaration, name, params in _EXTERN_DECLARATION.findall(header):
        types = [p.strip().rsplit(" ", 1)[0] for p in params.split(",") if p.strip()]
        if all(_PARAMETER_TYPE.match(t.replace(" *", "*")) for t in types):
            externs[name] = declaration
    return externs


def text() -> str:
    """The lean header: eagerc's own part and this torch's CUDA extern declarations."""
    externs = "".join(d + "\n" for d in _extern_declarations().values())
    return _OWN.replace("// @extern-prototypes@\n", externs, 1)


def fits(code: str, devices) -> bool:
    """Whether `code` (a wrapper without its header line) should build on the lean header: a
    GPU wrapper whose shim calls are all declared there and that names nothing of torch's C++
    API (the file-path loadKernel, dropped by `without_file_loader`, aside)."""
    if set(devices) != REPLACES:
        return False
    names = set(_SHIM_NAME.findall(code))
    externs = _extern_declarations()
    if any(n not in DECLARED and n not in externs and not _GETTER.match(n) for n in names):
        return False
    return _TORCH_CPP.search(without_file_loader(code)) is None


def without_file_loader(code: str) -> str:
    """`code` without the generated loadKernel overload that reads a cubin file (its braces
    matched); unchanged when it has none."""
    match = _FILE_LOADER.search(code)
    if match is None:
        return code
    start = code.index("{", match.end())
    depth = 0
    for i in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[:match.start()] + code[i + 1:]
    return code
