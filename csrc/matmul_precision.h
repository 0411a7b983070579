// What the artifact loader offers a GPU plan launcher for its direct cuBLASLt matmuls
// (eagerc/codegen/triton/plan_launcher/lt_matmul.cpp): torch's TF32 setting for cuBLAS, read at
// each call, as ATen reads it.
#pragma once

namespace eagerc {

// Hands `library_handle`'s eagerc_set_matmul_precision (a plan launcher's) the reader,
// unless EAGERC_GPU_CUBLASLT=0 (every matmul then goes through ATen's shim). A library
// without that entry is left as it is.
void offer_matmul_precision(void* library_handle);

}  // namespace eagerc
