#include "matmul_precision.h"

#include <ATen/Context.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace eagerc {
namespace {

// 1 where float32 matmuls on cuBLAS may round their inputs to TF32
// (torch.backends.cuda.matmul.allow_tf32, or set_float32_matmul_precision below "highest").
int tf32_allowed_for_cublas() {
  return at::globalContext().allowTF32CuBLAS() ? 1 : 0;
}

bool enabled() {
  // eagerc/_config.py GPU_CUBLASLT_ENV.
  const char* value = std::getenv("EAGERC_GPU_CUBLASLT");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

}  // namespace

void offer_matmul_precision(void* library_handle) {
  using SetFn = void (*)(void*);
  auto set = reinterpret_cast<SetFn>(dlsym(library_handle, "eagerc_set_matmul_precision"));
  if (set && enabled()) set(reinterpret_cast<void*>(&tf32_allowed_for_cublas));
}

}  // namespace eagerc
