// eagerc's plan launcher: the entry and guard of a GPU artifact whose kernels are all
// Triton's (or cuBLAS's through AOTI's mm/addmm shims), reading what to do from a launch plan (eagerc/compile/launch_plan.py) instead
// of being a generated C++ wrapper. Built once per machine as a shared library
// (plan_build.py); an artifact is a copy of that library with its plan text and cubins
// appended after the ELF image (the loader ignores bytes past it), which this code reads
// back from its own file when the library is loaded. So an op's build is a file write: no
// compiler and no linker run per op, and each artifact, a file of its own, is loaded as a
// library of its own with its own copy of the statics below.
//
// The calls and their order are those of the generated wrapper the plan was read from:
// the AOTI C shims (allocation through the pointer eagerc's loader may replace, views,
// sizes, device guard, current stream) and the CUDA driver's module load and launch.
// Declared here rather than included: the AOTI shims are torch's stable C ABI and these
// driver and runtime calls CUDA's stable C API, so this file needs neither torch's nor
// CUDA's headers (a test builds and runs it on a machine without CUDA).
#include <Python.h>

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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
AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
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
int cudaSetDevice(int device);
int cudaFree(void* pointer);
}

namespace {

constexpr int kMaxSlots = 64, kMaxInts = 256, kMaxDoubles = 64, kMaxStack = 64, kMaxArgs = 64, kMaxRank = 64;
constexpr int kMaxDynamicSharedAttribute = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

AOTITorchError (*empty_strided)(int64_t, const int64_t*, const int64_t*, int32_t, int32_t, int32_t,
                                AtenTensorHandle*) = aoti_torch_empty_strided;

void shim_failed(const char* what) {
  throw std::runtime_error(std::string(what) + " API call failed in eagerc's plan launcher");
}
#define EAGERC_CHECK(call) \
  if ((call) != 0) shim_failed(#call)

void driver_check(CUresult code) {
  if (code == 0) return;
  const char* message = nullptr;
  if (cuGetErrorString(code, &message) != 0 || message == nullptr) message = "invalid error code!";
  throw std::runtime_error(std::string("CUDA driver error: ") + message);
}

// One operation of an expression (launch_plan.py / cexpr.py write them as text).
enum class Code : uint8_t {
  ConstInt, ConstDouble, Int, Double, GuardInt, GuardDouble, Size, Stride,
  AddI, SubI, MulI, DivI, ModI, AddD, SubD, MulD, DivD, FloorDiv, PyMod, MaxI, MinI, MaxD, MinD,
  EqI, NeI, LtI, LeI, GtI, GeI, EqD, NeD, LtD, LeD, GtD, GeD, And, Or, Not, NegI, NegD,
  IntToDouble, DoubleToInt, DoubleToBool,
};
struct Op {
  Code code;
  int64_t a = 0, b = 0;  // a constant, a register, a slot and dimension
  double d = 0;
};
union Value {
  int64_t i;
  double d;
};
using Expr = std::vector<Op>;

enum class Kind : uint8_t { ItemI, ItemD, SetI, SetD, Device, Alloc, View, Move, Reset, Stream, Launch, Extern, Out };
enum class ArgKind : uint8_t { Pointer, Null, I32, I64, U32, F32, F64, Handle, Double };
enum class Extern : uint8_t { MmOut, BmmOut, AddmmOut, BaddbmmOut };
struct Arg {
  ArgKind kind;
  int64_t slot = 0;
  Expr value;
};
struct Step {
  Kind kind;
  int64_t a = 0, b = 0, c = 0;  // registers, slots, indices, dtype, device
  int32_t device_type = 0;
  std::vector<Expr> exprs;       // set: 1; alloc/view: sizes, strides (, offset); launch: grid
  std::vector<Arg> args;         // launch
  int64_t warps = 0, shared = 0;
};
struct Kernel {
  int64_t cubin = 0, shared = 0;
  std::string name;
  std::atomic<CUfunc_st*> function{nullptr};
};
struct Plan {
  int64_t inputs = 0, slots = 0, ints = 0, doubles = 0;
  std::vector<Kernel*> kernels;
  std::vector<Step> steps;
  std::vector<Expr> checks;
  std::mutex load;
};

// The artifact's own data, appended to this library's file by plan_build.py, as
// little-endian uint64 words and bytes: the plan's size, the number of cubins, each cubin's
// size, the plan text, the cubins, then the size of all the appended bytes (these two last
// words included) and the magic "EAGERCP1".
struct Payload {
  std::string plan;
  std::vector<void*> cubins;  // 64-byte aligned copies, as the cubins' ELF headers want
  std::string error;          // why it could not be read (raised at the first call)
};

void payload_anchor() {}

Payload* read_payload() {
  auto* p = new Payload();
  try {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&payload_anchor), &info) == 0 || info.dli_fname == nullptr)
      throw std::runtime_error("dladdr found no file");
    std::ifstream file(info.dli_fname, std::ios::binary | std::ios::ate);
    const auto end = static_cast<uint64_t>(file.tellg());
    uint64_t tail[2] = {0, 0};
    if (!file || end < 16) throw std::runtime_error("unreadable file");
    file.seekg(static_cast<std::streamoff>(end - 16));
    file.read(reinterpret_cast<char*>(tail), 16);
    if (!file || std::memcmp(&tail[1], "EAGERCP1", 8) != 0) throw std::runtime_error("no plan appended");
    if (tail[0] < 32 || tail[0] > end) throw std::runtime_error("bad size");
    std::vector<char> bytes(tail[0] - 16);
    file.seekg(static_cast<std::streamoff>(end - tail[0]));
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) throw std::runtime_error("truncated");
    uint64_t at = 0;
    auto word = [&] {
      if (at + 8 > bytes.size()) throw std::runtime_error("truncated header");
      uint64_t w;
      std::memcpy(&w, bytes.data() + at, 8);
      at += 8;
      return w;
    };
    const uint64_t plan_size = word(), n = word();
    if (n > 4096) throw std::runtime_error("bad cubin count");
    std::vector<uint64_t> sizes(n);
    for (uint64_t& size : sizes) size = word();
    if (plan_size > bytes.size() - at) throw std::runtime_error("bad plan size");
    p->plan.assign(bytes.data() + at, plan_size);
    at += plan_size;
    for (uint64_t size : sizes) {
      if (size > bytes.size() - at) throw std::runtime_error("bad cubin size");
      void* copy = std::aligned_alloc(64, (size + 1 + 63) / 64 * 64);
      std::memcpy(copy, bytes.data() + at, size);
      static_cast<char*>(copy)[size] = 0;
      p->cubins.push_back(copy);
      at += size;
    }
  } catch (const std::exception& e) {
    p->error = e.what();
  }
  return p;
}

// Read when the library is loaded, while its file is surely there (a cache may replace or
// prune files later); a failure is kept and raised by the first call, never at dlopen.
Payload& payload() {
  static Payload* p = read_payload();
  return *p;
}
__attribute__((constructor)) void read_payload_at_load() { payload(); }

[[noreturn]] void bad_plan(const std::string& what) {
  throw std::runtime_error("eagerc: unreadable launch plan (" + what + ")");
}

int32_t dtype_of(const std::string& name) {
#define EAGERC_MATCH_DTYPE(n) if (name == #n) return aoti_torch_dtype_##n();
  EAGERC_DTYPES(EAGERC_MATCH_DTYPE)
#undef EAGERC_MATCH_DTYPE
  bad_plan("dtype " + name);
}

int32_t device_type_of(const std::string& name) {
  if (name == "cpu") return aoti_torch_device_type_cpu();
  if (name == "cuda") return aoti_torch_device_type_cuda();
  if (name == "privateuse1") return aoti_torch_device_type_privateuse1();
  bad_plan("device type " + name);
}

int64_t checked(int64_t value, int64_t limit, const char* what) {
  if (value < 0 || value >= limit) bad_plan(std::string(what) + " out of range");
  return value;
}

Expr parse_expr(const std::string& text, const Plan& plan) {
  static const struct { const char* name; Code code; } kOps[] = {
      {"+i", Code::AddI}, {"-i", Code::SubI}, {"*i", Code::MulI}, {"/i", Code::DivI}, {"%i", Code::ModI},
      {"+d", Code::AddD}, {"-d", Code::SubD}, {"*d", Code::MulD}, {"/d", Code::DivD}, {"fd", Code::FloorDiv},
      {"pm", Code::PyMod}, {"maxi", Code::MaxI}, {"mini", Code::MinI}, {"maxd", Code::MaxD},
      {"mind", Code::MinD}, {"==i", Code::EqI}, {"!=i", Code::NeI}, {"<i", Code::LtI}, {"<=i", Code::LeI},
      {">i", Code::GtI}, {">=i", Code::GeI}, {"==d", Code::EqD}, {"!=d", Code::NeD}, {"<d", Code::LtD},
      {"<=d", Code::LeD}, {">d", Code::GtD}, {">=d", Code::GeD}, {"&&", Code::And}, {"||", Code::Or},
      {"!", Code::Not}, {"negi", Code::NegI}, {"negd", Code::NegD}, {"i2d", Code::IntToDouble},
      {"d2i", Code::DoubleToInt}, {"d2b", Code::DoubleToBool}};
  Expr expr;
  int depth = 0;
  std::stringstream ops(text);
  std::string op;
  while (std::getline(ops, op, ',')) {
    Op o{};
    const size_t colon = op.find(':');
    const std::string head = op.substr(0, colon), tail = colon == std::string::npos ? "" : op.substr(colon + 1);
    if (colon != std::string::npos) {
      ++depth;
      if (head == "ci") {
        o.code = Code::ConstInt, o.a = std::strtoll(tail.c_str(), nullptr, 10);
      } else if (head == "cd") {
        o.code = Code::ConstDouble, o.d = std::strtod(tail.c_str(), nullptr);
      } else if (head == "r") {
        o.code = Code::Int, o.a = checked(std::stoll(tail), plan.ints, "register");
      } else if (head == "f") {
        o.code = Code::Double, o.a = checked(std::stoll(tail), plan.doubles, "register");
      } else if (head == "I" || head == "F") {
        o.code = head == "I" ? Code::GuardInt : Code::GuardDouble, o.a = checked(std::stoll(tail), 1 << 20, "slot");
      } else if (head == "z" || head == "t") {
        const size_t second = tail.find(':');
        if (second == std::string::npos) bad_plan(op);
        o.code = head == "z" ? Code::Size : Code::Stride;
        o.a = checked(std::stoll(tail.substr(0, second)), plan.slots, "slot");
        o.b = checked(std::stoll(tail.substr(second + 1)), 64, "dimension");
      } else {
        bad_plan(op);
      }
    } else {
      bool found = false;
      for (const auto& known : kOps) {
        if (op == known.name) o.code = known.code, found = true;
      }
      if (!found) bad_plan(op);
      const bool unary = o.code >= Code::Not;
      depth -= unary ? 0 : 1;
      if (depth < 1) bad_plan("stack underflow in " + text);
    }
    if (depth > kMaxStack) bad_plan("expression too deep");
    expr.push_back(o);
  }
  if (depth != 1) bad_plan("expression " + text);
  return expr;
}

Plan* parse_plan(const char* text) {
  auto* plan = new Plan();
  std::stringstream lines(text);
  std::string line, word;
  std::getline(lines, line);
  if (line != "eagerc-launch-plan 1") bad_plan("version: " + line);
  while (std::getline(lines, line)) {
    std::stringstream words(line);
    std::vector<std::string> w;
    while (words >> word) w.push_back(word);
    if (w.empty()) continue;
    auto num = [&](size_t i) {
      if (i >= w.size()) bad_plan("short line: " + line);
      return std::stoll(w[i]);
    };
    auto expr_at = [&](size_t i) {
      if (i >= w.size()) bad_plan("short line: " + line);
      return parse_expr(w[i], *plan);
    };
    const std::string& k = w[0];
    if (k == "inputs") plan->inputs = num(1);
    else if (k == "slots") plan->slots = num(1);
    else if (k == "ints") plan->ints = num(1);
    else if (k == "doubles") plan->doubles = num(1);
    else if (k == "kernel") {
      auto* kernel = new Kernel();
      kernel->cubin = num(2), kernel->shared = num(3), kernel->name = w.at(4);
      if (num(1) != static_cast<int64_t>(plan->kernels.size())) bad_plan(line);
      plan->kernels.push_back(kernel);
    } else if (k == "check") {
      plan->checks.push_back(expr_at(1));
    } else {
      Step s;
      if (k == "item_i" || k == "item_d") {
        s.kind = k == "item_i" ? Kind::ItemI : Kind::ItemD;
        s.a = checked(num(1), k == "item_i" ? plan->ints : plan->doubles, "register");
        s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "seti" || k == "setd") {
        s.kind = k == "seti" ? Kind::SetI : Kind::SetD;
        s.a = checked(num(1), k == "seti" ? plan->ints : plan->doubles, "register");
        s.exprs.push_back(expr_at(2));
      } else if (k == "device" || k == "stream") {
        s.kind = k == "device" ? Kind::Device : Kind::Stream, s.a = num(1);
      } else if (k == "alloc") {
        s.kind = Kind::Alloc, s.a = checked(num(1), plan->slots, "slot"), s.b = dtype_of(w.at(2));
        s.device_type = device_type_of(w.at(3)), s.c = num(4);
        const int64_t ndim = checked(num(5), kMaxRank + 1, "rank");
        for (int64_t i = 0; i < 2 * ndim; ++i) s.exprs.push_back(expr_at(6 + i));
      } else if (k == "view") {
        s.kind = Kind::View, s.a = checked(num(1), plan->slots, "slot"), s.b = checked(num(2), plan->slots, "slot");
        const int64_t ndim = checked(num(3), kMaxRank + 1, "rank");
        for (int64_t i = 0; i < 2 * ndim + 1; ++i) s.exprs.push_back(expr_at(4 + i));
      } else if (k == "move") {
        s.kind = Kind::Move, s.a = checked(num(1), plan->slots, "slot"), s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "reset") {
        s.kind = Kind::Reset, s.a = checked(num(1), plan->slots, "slot");
      } else if (k == "out") {
        s.kind = Kind::Out, s.a = num(1), s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "extern") {
        s.kind = Kind::Extern;
        const std::string& name = w.at(1);
        const char* kinds;
        if (name == "aoti_torch_cuda_mm_out") s.a = static_cast<int64_t>(Extern::MmOut), kinds = "hhh";
        else if (name == "aoti_torch_cuda_bmm_out") s.a = static_cast<int64_t>(Extern::BmmOut), kinds = "hhh";
        else if (name == "aoti_torch_cuda_addmm_out") s.a = static_cast<int64_t>(Extern::AddmmOut), kinds = "hhhhdd";
        else if (name == "aoti_torch_cuda_baddbmm_out") s.a = static_cast<int64_t>(Extern::BaddbmmOut), kinds = "hhhhdd";
        else bad_plan("extern " + name);
        const int64_t n = num(2);
        if (n != static_cast<int64_t>(std::strlen(kinds))) bad_plan("arguments of " + name);
        for (int64_t i = 0; i < n; ++i) {
          const std::string& a = w.at(3 + i);
          if (a.size() < 3 || a[0] != kinds[i] || a[1] != ':') bad_plan(a);
          Arg arg;
          if (kinds[i] == 'h') {
            arg.kind = ArgKind::Handle, arg.slot = checked(std::stoll(a.substr(2)), plan->slots, "slot");
          } else {
            arg.kind = ArgKind::Double, arg.value = parse_expr(a.substr(2), *plan);
          }
          s.args.push_back(std::move(arg));
        }
      } else if (k == "launch") {
        s.kind = Kind::Launch, s.a = checked(num(1), plan->kernels.size(), "kernel");
        s.warps = num(2), s.shared = num(3);
        for (int i = 0; i < 3; ++i) s.exprs.push_back(expr_at(4 + i));
        const int64_t n = checked(num(7), kMaxArgs + 1, "argument count");
        for (int64_t i = 0; i < n; ++i) {
          const std::string& a = w.at(8 + i);
          Arg arg;
          const size_t colon = a.find(':');
          const std::string type = a.substr(0, colon);
          if (a == "null") {
            arg.kind = ArgKind::Null;
          } else if (colon == std::string::npos) {
            bad_plan(a);
          } else if (type == "p") {
            arg.kind = ArgKind::Pointer, arg.slot = checked(std::stoll(a.substr(2)), plan->slots, "slot");
          } else {
            static const struct { const char* name; ArgKind kind; } kTypes[] = {
                {"i32", ArgKind::I32}, {"i64", ArgKind::I64}, {"u32", ArgKind::U32},
                {"f32", ArgKind::F32}, {"f64", ArgKind::F64}};
            bool found = false;
            for (const auto& t : kTypes) {
              if (type == t.name) arg.kind = t.kind, found = true;
            }
            if (!found) bad_plan(a);
            arg.value = parse_expr(a.substr(colon + 1), *plan);
          }
          s.args.push_back(std::move(arg));
        }
      } else {
        bad_plan("step " + k);
      }
      plan->steps.push_back(std::move(s));
    }
  }
  if (plan->slots > kMaxSlots || plan->ints > kMaxInts || plan->doubles > kMaxDoubles ||
      plan->inputs > plan->slots)
    bad_plan("tables too large");
  return plan;
}

Plan& plan() {
  static Plan* parsed = [] {  // thread-safe once (C++11 statics)
    if (!payload().error.empty()) throw std::runtime_error("eagerc: launch plan not found: " + payload().error);
    return parse_plan(payload().plan.c_str());
  }();
  return *parsed;
}

// What one call holds; owned handles and the device guard are released however it ends.
struct Frame {
  AtenTensorHandle slots[kMaxSlots] = {};
  int64_t ints[kMaxInts];
  double doubles[kMaxDoubles];
  CUstream_st* stream = nullptr;
  CUDAGuardHandle guard = nullptr;
  ~Frame() {
    for (AtenTensorHandle& h : slots) {
      if (h != nullptr) aoti_torch_delete_tensor_object(h);
    }
    if (guard != nullptr) aoti_torch_delete_cuda_guard(guard);
  }
  AtenTensorHandle slot(int64_t i) const {
    if (slots[i] == nullptr) throw std::runtime_error("eagerc: launch plan reads a released tensor");
    return slots[i];
  }
};

// C++'s arithmetic on int64_t without its undefined cases: overflow wraps, and a division
// by zero (reached only where C++ would have short-circuited around it) gives 0.
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }
int64_t div_trunc(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(0 - static_cast<uint64_t>(a));
  return a / b;
}
int64_t mod_trunc(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
int64_t to_int(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// What expressions read: registers, the guard's arrays, the call's tensors.
struct Env {
  const int64_t* ints = nullptr;
  const double* doubles = nullptr;
  const int64_t* guard_ints = nullptr;
  const double* guard_doubles = nullptr;
  const Frame* frame = nullptr;
};

Value eval(const Expr& expr, const Env& env) {
  Value stack[kMaxStack];
  int top = -1;  // parse_expr checked the depth and that every operation has its operands
  for (const Op& o : expr) {
    switch (o.code) {  // leaves
      case Code::ConstInt: stack[++top].i = o.a; continue;
      case Code::ConstDouble: stack[++top].d = o.d; continue;
      case Code::Int: stack[++top].i = env.ints[o.a]; continue;
      case Code::Double: stack[++top].d = env.doubles[o.a]; continue;
      case Code::GuardInt: stack[++top].i = env.guard_ints[o.a]; continue;
      case Code::GuardDouble: stack[++top].d = env.guard_doubles[o.a]; continue;
      case Code::Size:
      case Code::Stride: {
        if (env.frame == nullptr) bad_plan("a guard reads a tensor");
        int64_t* values = nullptr;
        EAGERC_CHECK(o.code == Code::Size ? aoti_torch_get_sizes(env.frame->slot(o.a), &values)
                                          : aoti_torch_get_strides(env.frame->slot(o.a), &values));
        stack[++top].i = values[o.b];
        continue;
      }
      default: break;
    }
    Value& y = stack[top];
    switch (o.code) {  // unary: y -> y
      case Code::Not: y.i = !y.i; continue;
      case Code::NegI: y.i = wrap(0 - static_cast<uint64_t>(y.i)); continue;
      case Code::NegD: y.d = -y.d; continue;
      case Code::IntToDouble: y.d = static_cast<double>(y.i); continue;
      case Code::DoubleToInt: y.i = to_int(y.d); continue;
      case Code::DoubleToBool: y.i = y.d != 0.0; continue;
      default: break;
    }
    Value& x = stack[top - 1];
    switch (o.code) {  // binary: x op y -> x
      case Code::AddI: x.i = wrap(static_cast<uint64_t>(x.i) + static_cast<uint64_t>(y.i)); break;
      case Code::SubI: x.i = wrap(static_cast<uint64_t>(x.i) - static_cast<uint64_t>(y.i)); break;
      case Code::MulI: x.i = wrap(static_cast<uint64_t>(x.i) * static_cast<uint64_t>(y.i)); break;
      case Code::DivI: x.i = div_trunc(x.i, y.i); break;
      case Code::ModI: x.i = mod_trunc(x.i, y.i); break;
      case Code::AddD: x.d = x.d + y.d; break;
      case Code::SubD: x.d = x.d - y.d; break;
      case Code::MulD: x.d = x.d * y.d; break;
      case Code::DivD: x.d = x.d / y.d; break;
      case Code::FloorDiv: {  // eagerc_floordiv (guards.py)
        const int64_t q = div_trunc(x.i, y.i);
        x.i = (y.i != 0 && q * y.i != x.i && ((x.i < 0) != (y.i < 0))) ? q - 1 : q;
        break;
      }
      case Code::PyMod: {  // eagerc_mod (guards.py)
        const int64_t r = mod_trunc(x.i, y.i);
        x.i = (r != 0 && ((r < 0) != (y.i < 0))) ? r + y.i : r;
        break;
      }
      case Code::MaxI: x.i = x.i < y.i ? y.i : x.i; break;  // std::max: (a < b) ? b : a
      case Code::MinI: x.i = y.i < x.i ? y.i : x.i; break;  // std::min: (b < a) ? b : a
      case Code::MaxD: x.d = x.d < y.d ? y.d : x.d; break;
      case Code::MinD: x.d = y.d < x.d ? y.d : x.d; break;
      case Code::EqI: x.i = x.i == y.i; break;
      case Code::NeI: x.i = x.i != y.i; break;
      case Code::LtI: x.i = x.i < y.i; break;
      case Code::LeI: x.i = x.i <= y.i; break;
      case Code::GtI: x.i = x.i > y.i; break;
      case Code::GeI: x.i = x.i >= y.i; break;
      case Code::EqD: x.i = x.d == y.d; break;
      case Code::NeD: x.i = x.d != y.d; break;
      case Code::LtD: x.i = x.d < y.d; break;
      case Code::LeD: x.i = x.d <= y.d; break;
      case Code::GtD: x.i = x.d > y.d; break;
      case Code::GeD: x.i = x.d >= y.d; break;
      case Code::And: x.i = x.i && y.i; break;
      case Code::Or: x.i = x.i || y.i; break;
      default: bad_plan("operation");
    }
    --top;
  }
  return stack[0];
}

CUfunc_st* function_of(Plan& p, Kernel& k) {
  CUfunc_st* function = k.function.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  std::lock_guard<std::mutex> lock(p.load);
  function = k.function.load(std::memory_order_relaxed);
  if (function == nullptr) {
    CUmod_st* module = nullptr;
    if (k.cubin >= static_cast<int64_t>(payload().cubins.size())) bad_plan("cubin index");
    driver_check(cuModuleLoadData(&module, payload().cubins[k.cubin]));
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
      case ArgKind::Double: bad_plan("an extern's argument in a launch");
    }
    params[i] = at;
  }
  driver_check(cuLaunchKernel(function, grid[0], grid[1], grid[2], 32 * static_cast<unsigned>(s.warps), 1, 1,
                              static_cast<unsigned>(s.shared), f.stream, params, nullptr));
}

void call_extern(const Step& s, const Frame& f, const Env& env) {
  auto h = [&](size_t i) { return f.slot(s.args[i].slot); };
  auto d = [&](size_t i) { return eval(s.args[i].value, env).d; };
  switch (static_cast<Extern>(s.a)) {
    case Extern::MmOut: EAGERC_CHECK(aoti_torch_cuda_mm_out(h(0), h(1), h(2))); break;
    case Extern::BmmOut: EAGERC_CHECK(aoti_torch_cuda_bmm_out(h(0), h(1), h(2))); break;
    case Extern::AddmmOut: EAGERC_CHECK(aoti_torch_cuda_addmm_out(h(0), h(1), h(2), h(3), d(4), d(5))); break;
    case Extern::BaddbmmOut: EAGERC_CHECK(aoti_torch_cuda_baddbmm_out(h(0), h(1), h(2), h(3), d(4), d(5))); break;
  }
}

void run(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {
  Plan& p = plan();
  Frame f;
  Env env;
  env.ints = f.ints, env.doubles = f.doubles, env.frame = &f;
  for (int64_t i = 0; i < p.inputs; ++i) f.slots[i] = inputs[i], inputs[i] = nullptr;  // stolen
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
        EAGERC_CHECK(aoti_torch_create_cuda_guard(static_cast<int32_t>(s.a), &f.guard));
        // A thread that made no CUDA runtime call has no current context (gpu_context.py).
        CUctx_st* context = nullptr;
        if (cuCtxGetCurrent(&context) != 0 || context == nullptr) {
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
        if (f.slots[s.a] != nullptr) aoti_torch_delete_tensor_object(f.slots[s.a]);
        f.slots[s.a] = made;
        break;
      }
      case Kind::Move: std::swap(f.slots[s.a], f.slots[s.b]); break;
      case Kind::Reset:
        if (f.slots[s.a] != nullptr) aoti_torch_delete_tensor_object(f.slots[s.a]);
        f.slots[s.a] = nullptr;
        break;
      case Kind::Launch: launch(p, s, f, env); break;
      case Kind::Extern: call_extern(s, f, env); break;
      case Kind::Out: outputs[s.a] = f.slots[s.b], f.slots[s.b] = nullptr; break;
    }
  }
}

}  // namespace

// The loader (csrc/direct_alloc.cpp) points allocations at eagerc's direct allocation.
EAGERC_EXPORT void eagerc_set_allocator(void* fn) {
  empty_strided = reinterpret_cast<decltype(empty_strided)>(fn);
}

// Checked by the loader (csrc/artifact.cpp) right after dlopen: a plan that is missing or
// unreadable makes the artifact fail to load, so the cache rebuilds it, instead of
// failing at every call.
EAGERC_EXPORT const char* eagerc_load_error() {
  static const std::string error = [] {
    try {
      plan();
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }();
  return error.empty() ? nullptr : error.c_str();
}

EAGERC_EXPORT void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) { run(inputs, outputs); }

EAGERC_EXPORT int eagerc_guard(const int64_t* I, const double* F) {
  Env env;
  env.guard_ints = I, env.guard_doubles = F;
  for (const Expr& check : plan().checks) {
    if (eval(check, env).i == 0) return 0;
  }
  return 1;
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
