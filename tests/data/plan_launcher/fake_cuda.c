/* Stands in for the CUDA driver, runtime and CUDA shims when tests/test_launch_plan.py runs
 * eagerc's plan launcher on a machine without a GPU: each call is recorded for the test. */
#include <stdint.h>
#include <string.h>

typedef struct {
  unsigned grid[3], block[3], shared;
  void* stream;
  int64_t args[16];
} FakeLaunch;

FakeLaunch fake_launches[8];
int fake_launch_count = 0;
int fake_args_per_launch = 0;
char fake_loaded_image[32];
char fake_function_name[64];
int fake_shared_attribute = -1;
int fake_guard_device = -1;

int cuModuleLoadData(void** module, const void* image) {
  memcpy(fake_loaded_image, image, sizeof fake_loaded_image);
  *module = (void*)0x1;
  return 0;
}
int cuModuleGetFunction(void** function, void* module, const char* name) {
  (void)module;
  strncpy(fake_function_name, name, sizeof fake_function_name - 1);
  *function = (void*)0x2;
  return 0;
}
int cuFuncSetAttribute(void* function, int attribute, int value) {
  (void)function;
  if (attribute == 8) fake_shared_attribute = value;
  return 0;
}
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  (void)f; (void)extra;
  FakeLaunch* l = &fake_launches[fake_launch_count++ % 8];
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
  l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
  l->shared = shared, l->stream = stream;
  for (int i = 0; i < fake_args_per_launch && i < 16; ++i) memcpy(&l->args[i], params[i], 8);
  return 0;
}
int cuGetErrorString(int error, const char** message) { (void)error; *message = "fake"; return 0; }
int fake_context_queries = 0;
int cuCtxGetCurrent(void** context) { ++fake_context_queries; *context = (void*)0x3; return 0; }
int cudaGetDevice(int* device) { *device = 0; return 0; }
int fake_device_count = 2; /* read once per library, at its first device step */
int cudaGetDeviceCount(int* count) { *count = fake_device_count; return 0; }
int cudaSetDevice(int device) { (void)device; return 0; }
int cudaFree(void* pointer) { (void)pointer; return 0; }
int aoti_torch_get_current_cuda_stream(int32_t device, void** stream) { (void)device; *stream = (void*)0x5eed; return 0; }
int aoti_torch_create_cuda_guard(int32_t device, void** guard) { fake_guard_device = device; *guard = (void*)0x6; return 0; }
int aoti_torch_delete_cuda_guard(void* guard) { (void)guard; return 0; }

/* The extern calls a plan may make: record which, and the scalars. */
char fake_extern[32];
double fake_extern_scalars[2];
void* fake_extern_handles[4];
static int fake_extern_call(const char* name, void* a, void* b, void* c, void* d, double beta, double alpha) {
  strncpy(fake_extern, name, sizeof fake_extern - 1);
  fake_extern_handles[0] = a, fake_extern_handles[1] = b, fake_extern_handles[2] = c, fake_extern_handles[3] = d;
  fake_extern_scalars[0] = beta, fake_extern_scalars[1] = alpha;
  return 0;
}
int aoti_torch_cuda_mm_out(void* out, void* self, void* mat2) { return fake_extern_call("mm_out", out, self, mat2, 0, 0, 0); }
int aoti_torch_cuda_bmm_out(void* out, void* self, void* mat2) { return fake_extern_call("bmm_out", out, self, mat2, 0, 0, 0); }
int aoti_torch_cuda_addmm_out(void* out, void* self, void* m1, void* m2, double beta, double alpha) {
  return fake_extern_call("addmm_out", out, self, m1, m2, beta, alpha);
}
int aoti_torch_cuda_baddbmm_out(void* out, void* self, void* b1, void* b2, double beta, double alpha) {
  return fake_extern_call("baddbmm_out", out, self, b1, b2, beta, alpha);
}

/* Convolution returns a new tensor: here a new handle of its input (the shim torch_cpu has). */
int aoti_torch_new_tensor_handle(void* orig, void** made);
int64_t fake_conv_arrays[4][4];
int64_t fake_conv_lengths[4];
int64_t fake_conv_ints[2]; /* transposed, groups */
int aoti_torch_cuda_convolution(void* input, void* weight, void** bias, const int64_t* stride, int64_t stride_len,
                                const int64_t* padding, int64_t padding_len, const int64_t* dilation,
                                int64_t dilation_len, int32_t transposed, const int64_t* output_padding,
                                int64_t output_padding_len, int64_t groups, void** ret) {
  const int64_t* arrays[4] = {stride, padding, dilation, output_padding};
  const int64_t lengths[4] = {stride_len, padding_len, dilation_len, output_padding_len};
  for (int i = 0; i < 4; ++i) {
    fake_conv_lengths[i] = lengths[i];
    for (int j = 0; j < lengths[i] && j < 4; ++j) fake_conv_arrays[i][j] = arrays[i][j];
  }
  fake_conv_ints[0] = transposed, fake_conv_ints[1] = groups;
  fake_extern_call("convolution", input, weight, bias == 0 ? 0 : *bias, 0, 0, 0);
  return aoti_torch_new_tensor_handle(input, ret);
}
