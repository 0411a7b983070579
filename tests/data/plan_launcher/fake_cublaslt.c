/* Stands in for cuBLASLt when tests/test_lt_matmul.py runs the plan launcher's direct
 * matmul on a machine without a GPU. Built with the soname libcublasLt.so.13, so the
 * launcher finds it in the process as it finds torch's. It computes what cuBLASLt defines
 * (column-major D = alpha * op(A) op(B) + beta * C, plus a bias epilogue) on host memory,
 * and records what it was asked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t rows, cols; int64_t ld; } Layout;
typedef struct { int compute, transa, transb, epilogue; const float* bias; } Desc;
typedef struct { uint64_t data[8]; size_t workspace; int state; float waves; int reserved[4]; } Heuristic;

int fake_lt_handles = 0, fake_lt_heuristics = 0, fake_lt_matmuls = 0;
int fake_lt_status = 0;            /* what cublasLtMatmul returns */
size_t fake_lt_workspace = 0;      /* what the heuristic says its algorithm needs */
size_t fake_lt_max_workspace = 0;  /* the preference the launcher set */
uint32_t fake_lt_alignments[4];
int fake_lt_compute = 0;
size_t fake_lt_workspace_given = 0;
void* fake_lt_stream = 0;

int cublasLtCreate(void** handle) { ++fake_lt_handles; *handle = (void*)0x11; return 0; }
int cublasLtMatmulDescCreate(Desc** desc, int compute, int scale) {
  (void)scale;
  *desc = calloc(1, sizeof(Desc));
  (*desc)->compute = compute, (*desc)->epilogue = 1;
  return 0;
}
int cublasLtMatmulDescSetAttribute(Desc* desc, int attribute, const void* value, size_t size) {
  (void)size;
  if (attribute == 3) memcpy(&desc->transa, value, sizeof(int));
  else if (attribute == 4) memcpy(&desc->transb, value, sizeof(int));
  else if (attribute == 7) memcpy(&desc->epilogue, value, sizeof(int));
  else if (attribute == 8) memcpy(&desc->bias, value, sizeof(void*));
  else return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  return 0;
}
int cublasLtMatrixLayoutCreate(Layout** layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != 0 || (int64_t)rows > ld) return 7;
  *layout = calloc(1, sizeof(Layout));
  (*layout)->rows = rows, (*layout)->cols = cols, (*layout)->ld = ld;
  return 0;
}
int cublasLtMatmulPreferenceCreate(void** preference) { *preference = (void*)0x22; return 0; }
int cublasLtMatmulPreferenceSetAttribute(void* preference, int attribute, const void* value, size_t size) {
  (void)preference;
  if (attribute == 1 && size == sizeof(size_t)) memcpy(&fake_lt_max_workspace, value, size);
  else if (attribute >= 5 && attribute <= 8 && size == 4) memcpy(&fake_lt_alignments[attribute - 5], value, 4);
  else return 7;
  return 0;
}
int cublasLtMatmulPreferenceDestroy(void* preference) { (void)preference; return 0; }
int cublasLtMatmulAlgoGetHeuristic(void* handle, Desc* desc, Layout* a, Layout* b, Layout* c, Layout* d,
                                   void* preference, int requested, Heuristic* results, int* returned) {
  (void)handle; (void)desc; (void)a; (void)b; (void)c; (void)d; (void)preference; (void)requested;
  ++fake_lt_heuristics;
  memset(results, 0, sizeof(Heuristic));
  results->workspace = fake_lt_workspace;
  *returned = 1;
  return 0;
}
int cublasLtMatmul(void* handle, Desc* desc, const float* alpha, const float* A, Layout* la, const float* B,
                   Layout* lb, const float* beta, const float* C, Layout* lc, float* D, Layout* ld,
                   const void* algo, void* workspace, size_t workspace_size, void* stream) {
  (void)handle; (void)algo; (void)lc;
  if (fake_lt_status != 0) return fake_lt_status;
  ++fake_lt_matmuls;
  fake_lt_compute = desc->compute, fake_lt_stream = stream;
  fake_lt_workspace_given = workspace != 0 ? workspace_size : 0;
  const uint64_t k = desc->transa == 0 ? la->cols : la->rows;
  for (uint64_t i = 0; i < ld->rows; ++i) {
    for (uint64_t j = 0; j < ld->cols; ++j) {
      double sum = 0;
      for (uint64_t p = 0; p < k; ++p) {
        const double x = desc->transa == 0 ? A[i + p * la->ld] : A[p + i * la->ld];
        const double y = desc->transb == 0 ? B[p + j * lb->ld] : B[j + p * lb->ld];
        sum += x * y;
      }
      double value = *alpha * sum;
      if (*beta != 0) value += *beta * C[i + j * ld->ld];
      if (desc->epilogue == 4) value += desc->bias[i];
      D[i + j * ld->ld] = (float)value;
    }
  }
  return 0;
}
