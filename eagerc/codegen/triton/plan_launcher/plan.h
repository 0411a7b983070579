// eagerc's plan launcher, shared declarations: a launch plan as the launcher holds it
// (parse.cpp reads the text launch_plan.py writes), the frame of one call, and the
// expressions' evaluation (eval.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "abi.h"

namespace eagerc_launcher {

constexpr int kMaxSlots = 64, kMaxInts = 256, kMaxDoubles = 64, kMaxStack = 64, kMaxArgs = 64, kMaxRank = 64;
constexpr int kMaxDynamicSharedAttribute = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

[[noreturn]] void bad_plan(const std::string& what);
void shim_failed(const char* what);
#define EAGERC_CHECK(call) \
  if ((call) != 0) shim_failed(#call)

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
// A launch's arguments (Pointer ... F64), and an extern's (Handle, Optional: a slot or none,
// Array: an int array, Returned: the slot of the handle the call makes, I32, I64, Double).
enum class ArgKind : uint8_t { Pointer, Null, I32, I64, U32, F32, F64, Handle, Double, Optional, Array, Returned };
enum class Extern : uint8_t { MmOut, BmmOut, AddmmOut, BaddbmmOut, Convolution };
struct Arg {
  ArgKind kind;
  int64_t slot = 0;  // -1: an absent optional tensor
  Expr value;
  std::vector<Expr> values;  // an array's
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
  std::vector<Expr> checks;                            // the guard's other terms
  std::vector<std::pair<int64_t, int64_t>> pinned;     // its terms I[a] == c, tried first
  int64_t guard_ints = 0, guard_doubles = 0;  // how many of the guard's arrays the checks read
  bool launches = false;  // any launch step (a plan of cuBLAS externs alone launches nothing itself)
  std::vector<void*> cubins;  // its kernels' images (64-byte aligned copies), by Kernel::cubin
  std::mutex load;
};

// The plan of this library (parsed from its payload on first use; throws if it cannot be).
Plan& plan();

// The plan of another artifact file built from this same library (its payload read from
// `path`): run by this library's code (eagerc_open_plan). Throws if it cannot be read.
Plan* open_plan(const char* path);

// The plan text and cubins appended to this library's file (payload.cpp).
struct Payload {
  std::string plan;
  std::vector<void*> cubins;  // 64-byte aligned copies, as the cubins' ELF headers want
  std::string error;          // why it could not be read (raised at the first call)
};
Payload& payload();
// The payload appended to the artifact file at `path`; its `error` says why not.
Payload read_payload(const char* path);

// What one call holds; owned handles and the device guard are released however it ends.
// A slot either owns its handle (a buffer, a view, an input the entry stole) or borrows it
// (an input of eagerc_entry_borrowed: the caller's own at::Tensor, never deleted here).
struct Frame {
  explicit Frame(int64_t used) : used(used) {
    for (int64_t i = 0; i < used; ++i) slots[i] = nullptr, owned[i] = false;
  }
  int64_t used;  // slots the plan uses (Plan::slots)
  AtenTensorHandle slots[kMaxSlots];
  bool owned[kMaxSlots];
  int64_t ints[kMaxInts];
  double doubles[kMaxDoubles];
  CUstream_st* stream = nullptr;
  CUDAGuardHandle guard = nullptr;
  ~Frame() {
    for (int64_t i = 0; i < used; ++i) release(i);
    if (guard != nullptr) aoti_torch_delete_cuda_guard(guard);
  }
  void release(int64_t i) {
    if (slots[i] != nullptr && owned[i]) aoti_torch_delete_tensor_object(slots[i]);
    slots[i] = nullptr;
    owned[i] = false;
  }
  void set(int64_t i, AtenTensorHandle h, bool own) {
    release(i);
    slots[i] = h;
    owned[i] = own;
  }
  AtenTensorHandle slot(int64_t i) const {
    if (slots[i] == nullptr) throw std::runtime_error("eagerc: launch plan reads a released tensor");
    return slots[i];
  }
};

// What expressions read: registers, the guard's arrays, the call's tensors.
struct Env {
  const int64_t* ints = nullptr;
  const double* doubles = nullptr;
  const int64_t* guard_ints = nullptr;
  const double* guard_doubles = nullptr;
  const Frame* frame = nullptr;
};

Value eval(const Expr& expr, const Env& env);

// How a plan allocates: AOTI's shim, or what the loader put in its place (eagerc_set_allocator).
extern AOTITorchError (*empty_strided)(int64_t, const int64_t*, const int64_t*, int32_t, int32_t, int32_t,
                                       AtenTensorHandle*);

// mm_out (bias null, beta 0) or addmm_out as one cuBLASLt call (lt_matmul.cpp); false,
// having launched nothing, for a call it does not serve: the caller then calls the shim.
bool lt_matmul(AtenTensorHandle out, AtenTensorHandle bias, AtenTensorHandle mat1, AtenTensorHandle mat2,
               double beta, double alpha, CUstream_st* stream);

}  // namespace eagerc_launcher
