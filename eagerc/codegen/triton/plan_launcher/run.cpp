// eagerc's plan launcher: the entry and guard of a GPU artifact whose kernels are all
// Triton's (or cuBLAS's and cuDNN's, through AOTI's mm/addmm/convolution shims), reading
// what to do from a launch plan (eagerc/codegen/triton/launch_plan.py) instead of being a
// generated C++ wrapper. Built once per machine as a shared library from this folder
// (plan_build.py); an artifact is a copy of that library with its plan text and cubins
// appended after the ELF image (the loader ignores bytes past it), which payload.cpp reads
// back from its own file when the library is loaded. So an op's build is a file write: no
// compiler and no linker run per op, and each artifact, a file of its own, is loaded as a
// library of its own with its own copy of the statics.
//
// The calls and their order are those of the generated wrapper the plan was read from:
// the AOTI C shims (allocation through the pointer eagerc's loader may replace, views,
// sizes, device guard, current stream), the CUDA driver's module load and launch, and
// cuBLAS's and cuDNN's shims. This file runs a plan and exports the entry points.
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "plan.h"

namespace eagerc_launcher {

void shim_failed(const char* what) {
  throw std::runtime_error(std::string(what) + " API call failed in eagerc's plan launcher");
}

AOTITorchError (*empty_strided)(int64_t, const int64_t*, const int64_t*, int32_t, int32_t, int32_t,
                                AtenTensorHandle*) = aoti_torch_empty_strided;

namespace {

void driver_check(CUresult code) {
  if (code == 0) return;
  const char* message = nullptr;
  if (cuGetErrorString(code, &message) != 0 || message == nullptr) message = "invalid error code!";
  throw std::runtime_error(std::string("CUDA driver error: ") + message);
}

CUfunc_st* function_of(Plan& p, Kernel& k) {
  CUfunc_st* function = k.function.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  std::lock_guard<std::mutex> lock(p.load);
  function = k.function.load(std::memory_order_relaxed);
  if (function == nullptr) {
    CUmod_st* module = nullptr;
    if (k.cubin >= static_cast<int64_t>(p.cubins.size())) bad_plan("cubin index");
    driver_check(cuModuleLoadData(&module, p.cubins[k.cubin]));
    driver_check(cuModuleGetFunction(&function, module, k.name.c_str()));
    if (k.shared > 0) driver_check(cuFuncSetAttribute(function, kMaxDynamicSharedAttribute, static_cast<int>(k.shared)));
    k.function.store(function, std::memory_order_release);
  }
  return function;
}

void launch(Plan& p, const Step& s, Frame& f, const Env& env) {
  uint32_t grid[3];
  for (int i = 0; i < 3; ++i) grid[i] = static_cast<uint32_t>(eval(s.exprs[i], env).i);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;
  CUfunc_st* function = function_of(p, *p.kernels[s.a]);
  uint64_t storage[kMaxArgs];
  void* params[kMaxArgs];
  for (size_t i = 0; i < s.args.size(); ++i) {
    const Arg& a = s.args[i];
    storage[i] = 0;
    void* at = &storage[i];
    switch (a.kind) {
      case ArgKind::Pointer: {
        void* data = nullptr;
        EAGERC_CHECK(aoti_torch_get_data_ptr(f.slot(a.slot), &data));
        *static_cast<uint64_t*>(at) = reinterpret_cast<uintptr_t>(data);
        break;
      }
      case ArgKind::Null: break;
      case ArgKind::I32: *static_cast<int32_t*>(at) = static_cast<int32_t>(eval(a.value, env).i); break;
      case ArgKind::I64: *static_cast<int64_t*>(at) = eval(a.value, env).i; break;
      case ArgKind::U32: *static_cast<uint32_t*>(at) = static_cast<uint32_t>(eval(a.value, env).i); break;
      case ArgKind::F32: *static_cast<float*>(at) = static_cast<float>(eval(a.value, env).d); break;
      case ArgKind::F64: *static_cast<double*>(at) = eval(a.value, env).d; break;
      case ArgKind::Handle:
      case ArgKind::Double:
      case ArgKind::Optional:
      case ArgKind::Array:
      case ArgKind::Returned: bad_plan("an extern's argument in a launch");
    }
    params[i] = at;
  }
  driver_check(cuLaunchKernel(function, grid[0], grid[1], grid[2], 32 * static_cast<unsigned>(s.warps), 1, 1,
                              static_cast<unsigned>(s.shared), f.stream, params, nullptr));
}

// An int array argument's values, evaluated into `values` (kMaxRank of them at most: parse.cpp).
const int64_t* int_array(const Arg& a, const Env& env, int64_t* values) {
  for (size_t i = 0; i < a.values.size(); ++i) values[i] = eval(a.values[i], env).i;
  return values;
}

void call_extern(const Step& s, Frame& f, const Env& env) {
  auto h = [&](size_t i) { return f.slot(s.args[i].slot); };
  auto d = [&](size_t i) { return eval(s.args[i].value, env).d; };
  auto n = [&](size_t i) { return eval(s.args[i].value, env).i; };
  auto len = [&](size_t i) { return static_cast<int64_t>(s.args[i].values.size()); };
  switch (static_cast<Extern>(s.a)) {
    case Extern::MmOut:
      if (!lt_matmul(h(0), nullptr, h(1), h(2), 0.0, 1.0, f.stream)) EAGERC_CHECK(aoti_torch_cuda_mm_out(h(0), h(1), h(2)));
      break;
    case Extern::BmmOut: EAGERC_CHECK(aoti_torch_cuda_bmm_out(h(0), h(1), h(2))); break;
    case Extern::AddmmOut:
      if (!lt_matmul(h(0), h(1), h(2), h(3), d(4), d(5), f.stream)) {
        EAGERC_CHECK(aoti_torch_cuda_addmm_out(h(0), h(1), h(2), h(3), d(4), d(5)));
      }
      break;
    case Extern::BaddbmmOut: EAGERC_CHECK(aoti_torch_cuda_baddbmm_out(h(0), h(1), h(2), h(3), d(4), d(5))); break;
    case Extern::Convolution: {
      int64_t stride[kMaxRank], padding[kMaxRank], dilation[kMaxRank], output_padding[kMaxRank];
      AtenTensorHandle bias = s.args[2].slot < 0 ? nullptr : h(2);
      AtenTensorHandle made = nullptr;
      EAGERC_CHECK(aoti_torch_cuda_convolution(
          h(0), h(1), bias == nullptr ? nullptr : &bias, int_array(s.args[3], env, stride), len(3),
          int_array(s.args[4], env, padding), len(4), int_array(s.args[5], env, dilation), len(5),
          static_cast<int32_t>(n(6)), int_array(s.args[7], env, output_padding), len(7), n(8), &made));
      f.set(s.args[9].slot, made, /*own=*/true);
      break;
    }
  }
}

// How many GPUs the process sees (fixed for its life: CUDA_VISIBLE_DEVICES is read once).
int visible_devices() {
  static const int count = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == 0 ? n : -1;
  }();
  return count;
}

// `borrowed`: the inputs are the caller's at::Tensor objects, read and never deleted
// (eagerc_entry_borrowed); otherwise the entry steals them, as a generated wrapper does.
void run(Plan& p, AtenTensorHandle* inputs, AtenTensorHandle* outputs, bool borrowed) {
  Frame f(p.slots);
  Env env;
  env.ints = f.ints, env.doubles = f.doubles, env.frame = &f;
  for (int64_t i = 0; i < p.inputs; ++i) {
    f.slots[i] = inputs[i], f.owned[i] = !borrowed;
    if (!borrowed) inputs[i] = nullptr;  // stolen
  }
  int64_t sizes[kMaxRank], strides[kMaxRank];
  for (const Step& s : p.steps) {
    switch (s.kind) {
      case Kind::ItemI:
      case Kind::ItemD: {
        void* data = nullptr;
        EAGERC_CHECK(aoti_torch_get_data_ptr(f.slot(s.b), &data));
        if (s.kind == Kind::ItemI) f.ints[s.a] = *static_cast<const int64_t*>(data);
        else f.doubles[s.a] = *static_cast<const double*>(data);
        break;
      }
      case Kind::SetI: f.ints[s.a] = eval(s.exprs[0], env).i; break;
      case Kind::SetD: f.doubles[s.a] = eval(s.exprs[0], env).d; break;
      case Kind::Device: {
        // With one GPU visible its device is the current one: the guard would set and
        // restore that same device (two runtime calls and a heap guard per call).
        if (visible_devices() != 1 || s.a != 0) {
          EAGERC_CHECK(aoti_torch_create_cuda_guard(static_cast<int32_t>(s.a), &f.guard));
        }
        // A thread that made no CUDA runtime call has no current context (gpu_context.py):
        // the driver's launches need one; ATen's externs (runtime API) make their own.
        CUctx_st* context = nullptr;
        if (p.launches && (cuCtxGetCurrent(&context) != 0 || context == nullptr)) {
          int device = 0;
          cudaGetDevice(&device);
          cudaSetDevice(device);
          cudaFree(nullptr);
        }
        break;
      }
      case Kind::Stream:
        EAGERC_CHECK(aoti_torch_get_current_cuda_stream(static_cast<int32_t>(s.a), reinterpret_cast<void**>(&f.stream)));
        break;
      case Kind::Alloc:
      case Kind::View: {
        const size_t ndim = (s.exprs.size() - (s.kind == Kind::View ? 1 : 0)) / 2;
        for (size_t i = 0; i < ndim; ++i) sizes[i] = eval(s.exprs[i], env).i, strides[i] = eval(s.exprs[ndim + i], env).i;
        AtenTensorHandle made = nullptr;
        if (s.kind == Kind::Alloc) {
          EAGERC_CHECK(empty_strided(static_cast<int64_t>(ndim), sizes, strides, static_cast<int32_t>(s.b),
                                     s.device_type, static_cast<int32_t>(s.c), &made));
        } else {
          EAGERC_CHECK(aoti_torch__reinterpret_tensor(f.slot(s.b), static_cast<int64_t>(ndim), sizes, strides,
                                                      eval(s.exprs[2 * ndim], env).i, &made));
        }
        f.set(s.a, made, /*own=*/true);
        break;
      }
      case Kind::Move:
        std::swap(f.slots[s.a], f.slots[s.b]);
        std::swap(f.owned[s.a], f.owned[s.b]);
        break;
      case Kind::Reset: f.release(s.a); break;
      case Kind::Launch: launch(p, s, f, env); break;
      case Kind::Extern: call_extern(s, f, env); break;
      case Kind::Out:
        if (f.owned[s.b]) {
          outputs[s.a] = f.slots[s.b], f.slots[s.b] = nullptr, f.owned[s.b] = false;
        } else {  // a borrowed input returned as it is: the caller gets a handle of its own
          EAGERC_CHECK(aoti_torch_new_tensor_handle(f.slot(s.b), &outputs[s.a]));
          f.release(s.b);
        }
        break;
    }
  }
}

}  // namespace
}  // namespace eagerc_launcher

// The loader (csrc/direct_alloc.cpp) points allocations at eagerc's direct allocation.
EAGERC_EXPORT void eagerc_set_allocator(void* fn) {
  eagerc_launcher::empty_strided = reinterpret_cast<decltype(eagerc_launcher::empty_strided)>(fn);
}

// Checked by the loader (csrc/artifact.cpp) right after dlopen: a plan that is missing or
// unreadable makes the artifact fail to load, so the cache rebuilds it, instead of
// failing at every call.
EAGERC_EXPORT const char* eagerc_load_error() {
  static const std::string error = [] {
    try {
      eagerc_launcher::plan();
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }();
  return error.empty() ? nullptr : error.c_str();
}

EAGERC_EXPORT void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  eagerc_launcher::run(eagerc_launcher::plan(), inputs, outputs, /*borrowed=*/false);
}

// The same, on handles the caller keeps (csrc/artifact.cpp passes its at::Tensor objects
// themselves: no heap handle per input and call).
EAGERC_EXPORT void eagerc_entry_borrowed(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  eagerc_launcher::run(eagerc_launcher::plan(), inputs, outputs, /*borrowed=*/true);
}

namespace eagerc_launcher {
namespace {

// The values of the guard's arrays that last passed on this thread. The guard is a pure
// function of them, and a model calls an artifact with the same sizes again and again: a
// convolution's 40 interpreted terms cost about as much as its compiled wrapper's whole
// guard and lookup (ResNet-50 on GPU memory ran 8 % slower with its convolutions as plans
// before this), a comparison of the values a few nanoseconds. Failures are not kept: a
// variant that does not apply fails at its pinned terms (I[a] == c, read first).
struct GuardMemo {
  static constexpr int64_t kMax = 128;
  bool valid = false;
  int64_t ints[kMax];
  double doubles[kMax];

  static bool fits(const Plan& p) { return p.guard_ints <= kMax && p.guard_doubles <= kMax; }
  bool matches(const Plan& p, const int64_t* I, const double* F) const {
    return valid && std::memcmp(ints, I, sizeof(int64_t) * p.guard_ints) == 0 &&
           std::memcmp(doubles, F, sizeof(double) * p.guard_doubles) == 0;
  }
  void remember(const Plan& p, const int64_t* I, const double* F) {
    std::memcpy(ints, I, sizeof(int64_t) * p.guard_ints);
    std::memcpy(doubles, F, sizeof(double) * p.guard_doubles);
    valid = true;
  }
};

}  // namespace
}  // namespace eagerc_launcher

namespace eagerc_launcher {
namespace {

int guard(const Plan& p, GuardMemo& memo, const int64_t* I, const double* F) {
  for (const auto& [index, value] : p.pinned) {
    if (I[index] != value) return 0;
  }
  const bool memoized = GuardMemo::fits(p);
  if (memoized && memo.matches(p, I, F)) return 1;
  Env env;
  env.guard_ints = I, env.guard_doubles = F;
  for (const Expr& check : p.checks) {
    if (eval(check, env).i == 0) return 0;
  }
  if (memoized) memo.remember(p, I, F);
  return 1;
}

}  // namespace
}  // namespace eagerc_launcher

EAGERC_EXPORT int eagerc_guard(const int64_t* I, const double* F) {
  thread_local eagerc_launcher::GuardMemo memo;  // this artifact's (a library of its own), this thread's
  return eagerc_launcher::guard(eagerc_launcher::plan(), memo, I, F);
}

// Another artifact's plan, run by this library's code: artifacts built from one launcher
// library share one loaded copy of its code (csrc/artifact.cpp, EAGERC_GPU_SHARED_LAUNCHER),
// where each file loaded as a library of its own is one more copy for a forward that cycles
// through many kernels to run cold. Returns the plan, or null and `*error` (this thread's
// message, valid until its next call) when the file's plan cannot be read.
EAGERC_EXPORT void* eagerc_open_plan(const char* path, const char** error) {
  thread_local std::string message;
  try {
    return eagerc_launcher::open_plan(path);
  } catch (const std::exception& e) {
    message = e.what();
    *error = message.c_str();
    return nullptr;
  }
}

EAGERC_EXPORT int eagerc_plan_guard(void* plan, const int64_t* I, const double* F) {
  using eagerc_launcher::GuardMemo;
  // Each opened plan's memo, per thread (the library's own plan keeps its static one).
  thread_local std::unordered_map<const void*, std::unique_ptr<GuardMemo>> memos;
  std::unique_ptr<GuardMemo>& memo = memos[plan];
  if (!memo) memo = std::make_unique<GuardMemo>();
  return eagerc_launcher::guard(*static_cast<const eagerc_launcher::Plan*>(plan), *memo, I, F);
}

EAGERC_EXPORT void eagerc_plan_entry_borrowed(void* plan, AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  eagerc_launcher::run(*static_cast<eagerc_launcher::Plan*>(plan), inputs, outputs, /*borrowed=*/true);
}

// Inductor imports the built library as a Python module; eagerc calls eagerc_entry.
static PyObject* eagerc_not_from_python(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_RuntimeError, "eagerc's kernel holder calls this library, Python does not");
  return nullptr;
}
static PyMethodDef eagerc_methods[] = {{"inductor_entry_cpp", eagerc_not_from_python, METH_VARARGS, ""},
                                       {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef eagerc_module = {PyModuleDef_HEAD_INIT, "inductor_entry_cpp", nullptr, -1, eagerc_methods};
PyMODINIT_FUNC PyInit_inductor_entry_cpp(void) { return PyModule_Create(&eagerc_module); }
