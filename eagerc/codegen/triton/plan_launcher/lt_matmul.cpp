// A plan's mm_out and addmm_out as one cuBLASLt call, instead of ATen's structured kernel
// through AOTI's shim. Per call, ATen checks and resizes the out= tensor, builds cuBLASLt's
// descriptors, asks its heuristic for an algorithm and destroys them again (addmm with a row
// bias: at::cuda::blas::gemm_and_bias; mm goes through cuBLAS, which selects inside). Here
// the descriptors and the algorithm are made once per problem and thread and kept, so a hit
// is one cublasLtMatmul.
//
// The choices are ATen's own for addmm: the bias epilogue, CUBLAS_COMPUTE_32F (32F_FAST_TF32
// where torch allows TF32 for cuBLAS, read per call through the loader's hook), ATen's
// cuBLASLt workspace limit (CUBLASLT_WORKSPACE_SIZE KiB, 1 MiB unless set), the pointers'
// alignments (up to 16 bytes) as preferences, the heuristic's first algorithm. A call this
// does not serve (not float32, not 2-D, a layout cuBLAS cannot read as it is, k or n of 1,
// beta other than 1 with a bias, no cuBLASLt in the process, a failed status) returns false
// having launched nothing, and the plan calls the shim.
//
// cuBLASLt is found in the process (torch's CUDA build loaded it) and its C API declared
// here, as the rest of the launcher declares what it calls (abi.h).
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "plan.h"

namespace eagerc_launcher {
namespace {

// cuBLASLt's C API (cublasLt.h; tests/test_lt_matmul.py compares these with the header
// where one is installed).
using LtHandle = void*;
using LtDesc = void*;
using LtLayout = void*;
using LtPreference = void*;
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristic {
  LtAlgo algo;
  size_t workspace_size;
  int state;
  float waves;
  int reserved[4];
};
constexpr int kR32F = 0;                        // CUDA_R_32F
constexpr int kCompute32F = 68;                 // CUBLAS_COMPUTE_32F
constexpr int kCompute32FFastTF32 = 77;         // CUBLAS_COMPUTE_32F_FAST_TF32
constexpr int kOpN = 0, kOpT = 1;               // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8;
constexpr int kEpilogueDefault = 1, kEpilogueBias = 4;
constexpr int kPrefMaxWorkspace = 1, kPrefAlignA = 5;  // then B, C, D: 6, 7, 8

struct LtApi {
  int (*create)(LtHandle*);
  int (*desc_create)(LtDesc*, int, int);
  int (*desc_set)(LtDesc, int, const void*, size_t);
  int (*layout_create)(LtLayout*, int, uint64_t, uint64_t, int64_t);
  int (*pref_create)(LtPreference*);
  int (*pref_set)(LtPreference, int, const void*, size_t);
  int (*pref_destroy)(LtPreference);
  int (*heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPreference, int, LtHeuristic*, int*);
  int (*matmul)(LtHandle, LtDesc, const void*, const void*, LtLayout, const void*, LtLayout, const void*,
                const void*, LtLayout, void*, LtLayout, const LtAlgo*, void*, size_t, CUstream_st*);
};

// The process's cuBLASLt (by soname: torch's CUDA libraries loaded it), or null.
const LtApi* lt_api() {
  static const LtApi* api = []() -> const LtApi* {
    void* library = nullptr;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"}) {
      if ((library = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) != nullptr) break;
    }
    if (library == nullptr) return nullptr;
    auto* a = new LtApi;
    bool found = true;
    auto get = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
      found = found && fn != nullptr;
    };
    get(a->create, "cublasLtCreate");
    get(a->desc_create, "cublasLtMatmulDescCreate");
    get(a->desc_set, "cublasLtMatmulDescSetAttribute");
    get(a->layout_create, "cublasLtMatrixLayoutCreate");
    get(a->pref_create, "cublasLtMatmulPreferenceCreate");
    get(a->pref_set, "cublasLtMatmulPreferenceSetAttribute");
    get(a->pref_destroy, "cublasLtMatmulPreferenceDestroy");
    get(a->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    get(a->matmul, "cublasLtMatmul");
    return found ? a : nullptr;
  }();
  return api;
}

// ATen's cuBLASLt workspace limit (CUBLASLT_WORKSPACE_SIZE, in KiB).
size_t workspace_limit() {
  static const size_t bytes = [] {
    const char* value = std::getenv("CUBLASLT_WORKSPACE_SIZE");
    const long kib = value != nullptr ? std::strtol(value, nullptr, 10) : 0;
    return static_cast<size_t>(kib > 0 ? kib : 1024) * 1024;
  }();
  return bytes;
}

// The largest power of two dividing an address, up to 16: ATen passes up to 256, but no
// kernel asks for more than 16 (TMA's), and the cap keeps one problem one key where the
// allocator's addresses vary.
uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 1;
  while (alignment < 16 && address % (alignment * 2) == 0) alignment *= 2;
  return alignment;
}

// What the call needs to know of one tensor, read through AOTI's getters.
struct Facts {
  int64_t dim = 0;
  int64_t *sizes = nullptr, *strides = nullptr;
  int32_t dtype = 0, device_type = 0, device = 0;
  void* data = nullptr;
};

bool read_facts(AtenTensorHandle t, Facts* f) {
  return aoti_torch_get_dim(t, &f->dim) == 0 && aoti_torch_get_sizes(t, &f->sizes) == 0 &&
         aoti_torch_get_strides(t, &f->strides) == 0 && aoti_torch_get_dtype(t, &f->dtype) == 0 &&
         aoti_torch_get_device_type(t, &f->device_type) == 0 &&
         aoti_torch_get_device_index(t, &f->device) == 0 && aoti_torch_get_data_ptr(t, &f->data) == 0;
}

// A 2-D matrix as cuBLAS reads it: row-major (`column_major` false: cuBLAS's column-major
// view of its transpose, leading dimension stride 0) or column-major (leading dimension
// stride 1).
struct Matrix {
  int64_t rows = 0, cols = 0, ld = 0;
  bool column_major = false;
  void* data = nullptr;
  int32_t dtype = 0, device_type = 0, device = 0;
};

// The bytes a float32 matrix spans from its first element.
int64_t span(const Matrix& x) {
  return 4 * (x.column_major ? (x.cols - 1) * x.ld + x.rows : (x.rows - 1) * x.ld + x.cols);
}

bool overlap(const Matrix& x, const Matrix& y) {
  const auto* p = static_cast<const char*>(x.data);
  const auto* q = static_cast<const char*>(y.data);
  return p < q + span(y) && q < p + span(x);
}

bool read_matrix(AtenTensorHandle t, Matrix* m) {
  Facts f;
  if (!read_facts(t, &f) || f.dim != 2) return false;
  m->data = f.data, m->dtype = f.dtype, m->device_type = f.device_type, m->device = f.device;
  m->rows = f.sizes[0], m->cols = f.sizes[1];
  const int64_t* strides = f.strides;
  // A dimension of size 1 has no stride that matters (ATen's prepare_matrix_for_cublas).
  const int64_t row_stride = m->rows == 1 ? std::max<int64_t>(m->cols, 1) : strides[0];
  const int64_t col_stride = m->cols == 1 ? 1 : strides[1];
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, m->cols)) {
    m->ld = row_stride, m->column_major = false;
    return true;
  }
  const int64_t col_stride_c = m->cols == 1 ? std::max<int64_t>(m->rows, 1) : strides[1];
  const int64_t row_stride_c = m->rows == 1 ? 1 : strides[0];
  if (row_stride_c == 1 && col_stride_c >= std::max<int64_t>(1, m->rows)) {
    m->ld = col_stride_c, m->column_major = true;
    return true;
  }
  return false;
}

// One problem's descriptors and algorithm: everything but the pointers.
struct Key {
  int64_t m, n, k, lda, ldb, ldd, trans_a, trans_b, bias, tf32, device;
  int64_t align[4];
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) == 0; }
};
struct Entry {
  Key key;
  bool usable = false;
  LtDesc desc = nullptr;
  LtLayout a = nullptr, b = nullptr, d = nullptr;
  LtAlgo algo{};
  size_t workspace = 0;
};
constexpr size_t kMaxEntries = 64;  // per thread and artifact; past it, the shim serves

// Builds an entry's descriptors and asks the heuristic (ATen's preferences, the bias
// pointer set first as ATen sets it); `usable` stays false where cuBLASLt refuses (the
// shim then serves that problem).
void prepare(const LtApi& api, LtHandle handle, void* bias, Entry* e) {
  const Key& k = e->key;
  const int compute = k.tf32 ? kCompute32FFastTF32 : kCompute32F;
  const int trans_a = static_cast<int>(k.trans_a), trans_b = static_cast<int>(k.trans_b);
  const int epilogue = k.bias ? kEpilogueBias : kEpilogueDefault;
  if (api.desc_create(&e->desc, compute, kR32F) != 0 || api.desc_set(e->desc, kDescTransA, &trans_a, sizeof(int)) != 0 ||
      api.desc_set(e->desc, kDescTransB, &trans_b, sizeof(int)) != 0 ||
      api.desc_set(e->desc, kDescEpilogue, &epilogue, sizeof(int)) != 0 ||
      (k.bias && api.desc_set(e->desc, kDescBiasPointer, &bias, sizeof(bias)) != 0)) {
    return;
  }
  // Column-major: D (n x m) = op(A) (n x k) * op(B) (k x m), A the row-major mat2, B mat1.
  const bool a_n = trans_a == kOpN, b_n = trans_b == kOpN;
  if (api.layout_create(&e->a, kR32F, a_n ? k.n : k.k, a_n ? k.k : k.n, k.lda) != 0 ||
      api.layout_create(&e->b, kR32F, b_n ? k.k : k.m, b_n ? k.m : k.k, k.ldb) != 0 ||
      api.layout_create(&e->d, kR32F, k.n, k.m, k.ldd) != 0) {
    return;
  }
  LtPreference preference = nullptr;
  if (api.pref_create(&preference) != 0) return;
  const size_t limit = workspace_limit();
  bool set = api.pref_set(preference, kPrefMaxWorkspace, &limit, sizeof(limit)) == 0;
  for (int i = 0; i < 4 && set; ++i) {
    const uint32_t alignment = static_cast<uint32_t>(k.align[i]);
    set = api.pref_set(preference, kPrefAlignA + i, &alignment, sizeof(alignment)) == 0;
  }
  LtHeuristic result{};
  int returned = 0;
  if (set && api.heuristic(handle, e->desc, e->a, e->b, e->d, e->d, preference, 1, &result, &returned) == 0 &&
      returned > 0 && result.state == 0) {
    e->algo = result.algo, e->workspace = result.workspace_size, e->usable = true;
  }
  api.pref_destroy(preference);
}

struct ThreadState {
  LtHandle handles[64] = {};
  std::vector<Entry> entries;
};

// This thread's entry for `key` (made on first use), or null once the thread has too many.
const Entry* entry_for(const LtApi& api, const Key& key, void* bias, LtHandle* handle) {
  // Never destroyed: cuBLASLt may be gone before a thread's statics are.
  thread_local ThreadState* state = new ThreadState;
  if (key.device >= 64) return nullptr;
  LtHandle& h = state->handles[std::max<int64_t>(key.device, 0)];  // -1: a host test's stand-in
  if (h == nullptr && api.create(&h) != 0) {
    h = nullptr;
    return nullptr;
  }
  *handle = h;
  for (const Entry& e : state->entries) {
    if (e.key == key) return &e;
  }
  if (state->entries.size() >= kMaxEntries) return nullptr;
  state->entries.reserve(kMaxEntries);  // entries stay where they are
  state->entries.push_back(Entry{key});
  prepare(api, h, bias, &state->entries.back());
  return &state->entries.back();
}

}  // namespace

int (*tf32_allowed)() = nullptr;

bool lt_matmul(AtenTensorHandle out, AtenTensorHandle bias, AtenTensorHandle mat1, AtenTensorHandle mat2,
               double beta, double alpha, CUstream_st* stream) {
  if (tf32_allowed == nullptr) return false;  // the loader did not offer it (EAGERC_GPU_CUBLASLT=0)
  const LtApi* api = lt_api();
  if (api == nullptr) return false;
  Matrix a, b, d;
  if (!read_matrix(mat1, &a) || !read_matrix(mat2, &b) || !read_matrix(out, &d) || d.column_major) return false;
  const int32_t f32 = aoti_torch_dtype_float32();
  // Every tensor where the plan's output lives (a GPU wrapper's inputs are its device's).
  auto same_place = [&](int32_t dtype, int32_t device_type, int32_t device) {
    return dtype == f32 && device_type == d.device_type && device == d.device;
  };
  for (const Matrix* x : {&a, &b, &d}) {
    if (!same_place(x->dtype, x->device_type, x->device)) return false;
  }
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  // ATen keeps k or n of 1 off cuBLASLt (addmm_out_cuda_impl): the shim serves them.
  if (b.rows != k || d.rows != m || d.cols != n || m == 0 || n <= 1 || k <= 1) return false;
  if (overlap(d, a) || overlap(d, b)) return false;  // an out= over an input: ATen's to handle
  void* bias_data = nullptr;
  if (bias != nullptr) {
    // A row bias: 1-D of n, or its expansion to (m, n) with strides (0, 1).
    Facts f;
    if (beta != 1.0 || !read_facts(bias, &f)) return false;
    const int64_t *sizes = f.sizes, *strides = f.strides;
    const bool row = (f.dim == 1 && sizes[0] == n && (strides[0] == 1 || n == 1)) ||
                     (f.dim == 2 && sizes[0] == m && sizes[1] == n && (strides[0] == 0 || m == 1) &&
                      (strides[1] == 1 || n == 1));
    if (!row || !same_place(f.dtype, f.device_type, f.device)) return false;
    bias_data = f.data;
  }
  const Key key{m, n, k, b.ld, a.ld, d.ld, b.column_major ? kOpT : kOpN, a.column_major ? kOpT : kOpN,
                bias != nullptr, tf32_allowed() != 0, d.device,
                {alignment_of(b.data), alignment_of(a.data), alignment_of(d.data), alignment_of(d.data)}};
  LtHandle handle = nullptr;
  const Entry* e = entry_for(*api, key, bias_data, &handle);
  if (e == nullptr || !e->usable) return false;
  if (bias != nullptr && api->desc_set(e->desc, kDescBiasPointer, &bias_data, sizeof(bias_data)) != 0) return false;
  if (stream == nullptr && aoti_torch_get_current_cuda_stream(d.device, reinterpret_cast<void**>(&stream)) != 0) {
    return false;
  }
  // The workspace comes from the allocator on the call's stream, as a buffer would.
  AtenTensorHandle workspace = nullptr;
  void* workspace_data = nullptr;
  if (e->workspace > 0) {
    const int64_t size = static_cast<int64_t>(e->workspace), stride = 1;
    if (empty_strided(1, &size, &stride, aoti_torch_dtype_uint8(), d.device_type, d.device, &workspace) != 0) {
      return false;
    }
    aoti_torch_get_data_ptr(workspace, &workspace_data);
  }
  const float alpha_f = static_cast<float>(alpha), beta_f = 0.0f;
  const int status = api->matmul(handle, e->desc, &alpha_f, b.data, e->a, a.data, e->b, &beta_f, d.data, e->d,
                                 d.data, e->d, &e->algo, workspace_data, e->workspace, stream);
  if (workspace != nullptr) aoti_torch_delete_tensor_object(workspace);
  return status == 0;
}

}  // namespace eagerc_launcher

// The loader (csrc/matmul_precision.cpp) offers torch's TF32 setting for cuBLAS; without it
// the launcher leaves every matmul to the shim.
EAGERC_EXPORT void eagerc_set_matmul_precision(void* fn) {
  eagerc_launcher::tf32_allowed = reinterpret_cast<int (*)()>(fn);
}
