// The C functions eagerc's plan launcher calls, declared here rather than included: the
// AOTI shims are torch's stable C ABI and the CUDA driver and runtime calls CUDA's stable C
// API, so the launcher needs neither torch's nor CUDA's headers (tests/test_launch_plan.py
// builds and runs it on a machine without CUDA, with stand-ins for the CUDA ones).
#pragma once

#include <cstdint>

#define EAGERC_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
struct AtenTensorOpaque;
typedef AtenTensorOpaque* AtenTensorHandle;
typedef int32_t AOTITorchError;
struct CUDAGuardOpaque;
typedef CUDAGuardOpaque* CUDAGuardHandle;
AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                                        int32_t dtype, int32_t device_type, int32_t device_index,
                                        AtenTensorHandle* result);
AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** result);
AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** result);
AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** result);
AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* result);
AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* result);
AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* result);
AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* result);
AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig_handle, AtenTensorHandle* new_handle);
AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim, const int64_t* sizes,
                                              const int64_t* strides, int64_t storage_offset,
                                              AtenTensorHandle* result);
AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** result);
AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* result);
AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
// The extern calls a plan may make (launch_plan.EXTERNS), as torch's c_shim_cuda.h declares
// them (tests/test_launch_plan.py compares).
AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2);
AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2);
AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                         AtenTensorHandle mat2, double beta, double alpha);
AOTITorchError aoti_torch_cuda_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle batch1,
                                           AtenTensorHandle batch2, double beta, double alpha);
AOTITorchError aoti_torch_cuda_convolution(AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias,
                                           const int64_t* stride, int64_t stride_len_, const int64_t* padding,
                                           int64_t padding_len_, const int64_t* dilation, int64_t dilation_len_,
                                           int32_t transposed, const int64_t* output_padding,
                                           int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0);
int32_t aoti_torch_device_type_cpu();
int32_t aoti_torch_device_type_cuda();
int32_t aoti_torch_device_type_privateuse1();
#define EAGERC_DTYPES(X) X(float8_e5m2) X(float8_e4m3fn) X(float8_e5m2fnuz) X(float8_e4m3fnuz) \
  X(bfloat16) X(float16) X(float32) X(float64) X(uint8) X(uint16) X(uint32) X(uint64) X(int8) \
  X(int16) X(int32) X(int64) X(bool) X(complex32) X(complex64) X(complex128)
#define EAGERC_DECLARE_DTYPE(name) int32_t aoti_torch_dtype_##name();
EAGERC_DTYPES(EAGERC_DECLARE_DTYPE)

typedef int CUresult;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUctx_st;
CUresult cuModuleLoadData(CUmod_st** module, const void* image);
CUresult cuModuleGetFunction(CUfunc_st** function, CUmod_st* module, const char* name);
CUresult cuFuncSetAttribute(CUfunc_st* function, int attribute, int value);
CUresult cuLaunchKernel(CUfunc_st* f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                        unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream_st* stream,
                        void** params, void** extra);
CUresult cuGetErrorString(CUresult error, const char** message);
CUresult cuCtxGetCurrent(CUctx_st** context);
int cudaGetDevice(int* device);
int cudaGetDeviceCount(int* count);
int cudaSetDevice(int device);
int cudaFree(void* pointer);
}
