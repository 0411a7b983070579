
__asm__(".section .rodata\n.balign 64\n.globl eagerc_cubin_0\n.hidden eagerc_cubin_0\neagerc_cubin_0:\n.incbin \"/tmp/indc/zm/czmiug3bbcb43m6sljjqk4vq54gplh3pl3c4dzj7c6gs6qjmheo2.cubin\"\n.byte 0\n.previous\n");
extern "C" const unsigned char eagerc_cubin_0[];

#define CUDA_DRIVER_CHECK(EXPR)                    \
do {                                               \
    CUresult code = EXPR;                          \
    const char *msg;                               \
    CUresult code_get_error = cuGetErrorString(code, &msg); \
    if (code_get_error != CUDA_SUCCESS) {          \
        throw std::runtime_error(                  \
            std::string("CUDA driver error: ") +   \
            std::string("invalid error code!"));   \
    }                                              \
    if (code != CUDA_SUCCESS) {                    \
        throw std::runtime_error(                  \
            std::string("CUDA driver error: ") +   \
            std::string(msg));                     \
    }                                              \
} while (0);

static inline CUfunction loadKernel(
        std::string filePath,
        const std::string &funcName,
        uint32_t sharedMemBytes,
        const std::optional<std::string> &cubinDir = std::nullopt) {
    if (cubinDir) {
        std::filesystem::path p1{*cubinDir};
        std::filesystem::path p2{filePath};
        filePath = (p1 / p2.filename()).string();
    }

    CUmodule mod;
    CUfunction func;
    CUDA_DRIVER_CHECK(cuModuleLoad(&mod, filePath.c_str()));
    CUDA_DRIVER_CHECK(cuModuleGetFunction(&func, mod, funcName.c_str()));
    if (sharedMemBytes > 0) {
        CUDA_DRIVER_CHECK(cuFuncSetAttribute(
            func,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            sharedMemBytes
        ))
    }
    return func;
}

static inline CUfunction loadKernel(const void* start, const std::string &funcName, uint32_t sharedMemBytes) {
    CUmodule mod;
    CUfunction func;
    CUDA_DRIVER_CHECK(cuModuleLoadData(&mod, start));
    CUDA_DRIVER_CHECK(cuModuleGetFunction(&func, mod, funcName.c_str()));
    if (sharedMemBytes > 0) {
        CUDA_DRIVER_CHECK(cuFuncSetAttribute(
            func,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            sharedMemBytes
        ))
    }
    return func;
}

static inline void launchKernel(
        CUfunction func,
        uint32_t gridX,
        uint32_t gridY,
        uint32_t gridZ,
        uint32_t numWarps,
        uint32_t sharedMemBytes,
        void* args[],
        cudaStream_t stream) {
    CUDA_DRIVER_CHECK(cuLaunchKernel(
        func, gridX, gridY, gridZ, 32*numWarps, 1, 1, sharedMemBytes, stream, args, nullptr
    ));
}

static CUfunction triton_poi_fused_0 = nullptr;
template <typename in_out_ptr0_type_, typename in_ptr0_type_>
static inline void call_triton_poi_fused_0(
    const in_out_ptr0_type_& in_out_ptr0,
    const in_ptr0_type_& in_ptr0,
    int64_t ks0,
    int64_t ks1,
    int64_t ynumel,
    int64_t xnumel,
    int32_t device_idx_,
    cudaStream_t stream_,
    const std::optional<std::string>& cubin_dir_ = std::nullopt
){
    uint32_t grid_0 = ((xnumel + (256 - 1)) / (256));
    uint32_t grid_1 = ((ynumel + (4 - 1)) / (4));
    uint32_t grid_2 = 1;
    if (grid_0 == 0 || grid_1 == 0 || grid_2 == 0) return;
    if (triton_poi_fused_0 == nullptr) {
        triton_poi_fused_0 = loadKernel(eagerc_cubin_0, "triton_poi_fused_0", 0); 
    }
    CUdeviceptr var_0 = reinterpret_cast<CUdeviceptr>(in_out_ptr0.data_ptr());
    CUdeviceptr var_1 = reinterpret_cast<CUdeviceptr>(in_ptr0.data_ptr());
    int64_t var_2 = ks0;
    int64_t var_3 = ks1;
    int32_t var_4 = ynumel;
    int32_t var_5 = xnumel;
    CUdeviceptr global_scratch_scratch_6 = 0;
    CUdeviceptr profile_scratch_scratch_7 = 0;
    void* kernel_args_[] = {&var_0, &var_1, &var_2, &var_3, &var_4, &var_5, &global_scratch_scratch_6, &profile_scratch_scratch_7};
    launchKernel(triton_poi_fused_0, grid_0, grid_1, grid_2, 4, 0, kernel_args_, stream_);
}


void inductor_entry_impl(
    AtenTensorHandle*
        input_handles, // array of input AtenTensorHandle; handles
                        // are stolen; the array itself is borrowed
    AtenTensorHandle*
        output_handles  // array for writing output AtenTensorHandle; handles
                        // will be stolen by the caller; the array itself is
                        // borrowed)
) {
    

    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 3);
    auto arg0_1 = std::move(inputs[0]);
    auto arg1_1 = std::move(inputs[1]);
    auto arg2_1 = std::move(inputs[2]);
    auto arg0_1_size = arg0_1.sizes();
    int64_t s44 = arg0_1_size[1];
    int64_t s79 = arg0_1_size[2];
    int64_t s80 = arg0_1_size[3];
    auto arg1_1_size = arg1_1.sizes();
    int64_t s56 = arg1_1_size[0];

    AOTICudaGuard device_guard(0); { CUcontext eagerc_context = nullptr; if (cuCtxGetCurrent(&eagerc_context) != CUDA_SUCCESS || eagerc_context == nullptr) { int eagerc_device = 0; cudaGetDevice(&eagerc_device); cudaSetDevice(eagerc_device); cudaFree(nullptr); } }
    // Topologically Sorted Source Nodes: [], Original ATen: []
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cuda_convolution(arg0_1, arg1_1, nullptr, std::array<int64_t, 2>{2L, 2L}.cbegin(), 2, std::array<int64_t, 2>{0L, 0L}.cbegin(), 2, std::array<int64_t, 2>{1L, 1L}.cbegin(), 2, 0, std::array<int64_t, 2>{0L, 0L}.cbegin(), 2, 1L, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    arg0_1.reset();
    arg1_1.reset();
    const int64_t int_array_0[] = {1L, 1024L, 1L + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L))), 1L + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L)))};
    const int64_t int_array_1[] = {1024L + 1024L*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L))) + 1024L*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))) + 1024L*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L)))*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))), 1L + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L)))*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))) + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L))) + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))), 1L + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))), 1L};
    auto buf1 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf0, 4, int_array_0, int_array_1, 0L)); buf0.reset();  // reuse
    // Topologically Sorted Source Nodes: [], Original ATen: []
    int64_t triton_poi_fused_0_xnumel = 1L + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L)))*(c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L))) + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s79), static_cast<int64_t>(2L))) + (c10::div_floor_integer(static_cast<int64_t>((-1L) + s80), static_cast<int64_t>(2L)));
    cudaStream_t stream0;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(0, (void**)&stream0));
    call_triton_poi_fused_0(buf1, arg2_1, s79, s80, 1024L, triton_poi_fused_0_xnumel, 0, stream0);
    arg2_1.reset();
    output_handles[0] = buf1.release();
} // inductor_entry_impl

extern "C" void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  inductor_entry_impl(inputs, outputs);
}

#include <algorithm>
#include <cmath>
#include <cstdint>
static inline int64_t eagerc_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t eagerc_mod(int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }

extern "C" int eagerc_guard(const int64_t* I, const double* F) {
  const int64_t s44 = I[10];
  (void)s44;
  const int64_t s56 = I[18];
  (void)s56;
  const int64_t s60 = I[1];
  (void)s60;
  const int64_t s64 = I[9];
  (void)s64;
  const int64_t s79 = I[2];
  (void)s79;
  const int64_t s80 = I[3];
  (void)s80;
  if (!(I[0] == int64_t(1LL))) return 0;
  if (!(I[5] == (s79 * s80))) return 0;
  if (!(I[6] == s80)) return 0;
  if (!(I[7] == int64_t(1LL))) return 0;
  if (!(I[8] == int64_t(0LL))) return 0;
  if (!(I[11] == int64_t(1LL))) return 0;
  if (!(I[12] == int64_t(1LL))) return 0;
  if (!(I[13] == s44)) return 0;
  if (!(I[14] == int64_t(1LL))) return 0;
  if (!(I[17] == int64_t(0LL))) return 0;
  if (!(I[19] == int64_t(1LL))) return 0;
  if (!(I[20] == int64_t(0LL))) return 0;
  if (!(s60 == s44)) return 0;
  if (!(s56 == s64)) return 0;
  if (!((s44 * s79 * s80) <= int64_t(2147483647LL))) return 0;
  if (!((s56 * (int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s79), int64_t(2LL))) * (int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL)))) <= int64_t(2147483647LL))) return 0;
  if (!((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL))) != int64_t(1LL))) return 0;
  if (!((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s79), int64_t(2LL))) != int64_t(1LL))) return 0;
  if (!(s56 == int64_t(1024LL))) return 0;
  if (!(s44 == int64_t(512LL))) return 0;
  if (!((int64_t(512LL) * s79 * s80) <= int64_t(2147483647LL))) return 0;
  if (!(((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL))) * (int64_t(1024LL) + (int64_t(1024LL) * eagerc_floordiv((int64_t(-1LL) + s79), int64_t(2LL))))) <= int64_t(2147483647LL))) return 0;
  if (!((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL))) < ((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s79), int64_t(2LL))) * (int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL)))))) return 0;
  if (!((int64_t(1LL) + eagerc_floordiv((int64_t(-1LL) + s80), int64_t(2LL))) > int64_t(1LL))) return 0;
  if (!(s60 >= int64_t(2LL))) return 0;
  if (!(s79 >= int64_t(2LL))) return 0;
  if (!(s80 >= int64_t(3LL))) return 0;
  if (!(s64 >= int64_t(1024LL))) return 0;
  if (!(s64 <= int64_t(1024LL))) return 0;
  if (!(s44 >= int64_t(512LL))) return 0;
  if (!(s44 <= int64_t(512LL))) return 0;
  if (!(s56 >= int64_t(1024LL))) return 0;
  if (!(s56 <= int64_t(1024LL))) return 0;
  return 1;
}

// eagerc calls this library through eagerc_entry (csrc/artifact.cpp); Inductor only imports it.
static PyObject* eagerc_not_from_python(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_RuntimeError, "eagerc's kernel holder calls this library, Python does not");
  return nullptr;
}
static PyMethodDef eagerc_methods[] = {
    {"inductor_entry_cpp", eagerc_not_from_python, METH_VARARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef eagerc_module = {PyModuleDef_HEAD_INIT, "inductor_entry_cpp", nullptr, -1, eagerc_methods};
PyMODINIT_FUNC PyInit_inductor_entry_cpp(void) { return PyModule_Create(&eagerc_module); }
