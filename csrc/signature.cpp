#include "signature.h"

#include "host_alias.h"
#include "signature_layout.h"

#include <c10/macros/Macros.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <optional>

namespace eagerc {
namespace {

// Writes the key through a pointer into the string's own buffer: std::string's push_back
// and append are out-of-line libstdc++ calls, one per byte or int, which perf showed as
// 0.2 us of a convolution's signature (its four int lists). The string keeps its capacity
// from call to call; it is sized to kStart bytes (resize fills them, so not to a capacity
// that one long key left behind), grows by doubling, and finish() trims it to the key.
// The bytes are the same as appending.
class KeyWriter {
 public:
  static constexpr size_t kStart = 128;

  explicit KeyWriter(std::string& key) : key_(key) {
    key_.resize(kStart);
    data_ = key_.data();
    cap_ = key_.size();
  }
  void byte(int64_t v) {
    reserve(1);
    data_[len_++] = static_cast<char>(v & 0xff);
  }
  void raw(const void* p, size_t n) {
    reserve(n);
    std::memcpy(data_ + len_, p, n);
    len_ += n;
  }
  void finish() { key_.resize(len_); }

 private:
  void reserve(size_t n) {
    if (C10_UNLIKELY(len_ + n > cap_)) {
      key_.resize(std::max(2 * cap_, len_ + n));
      data_ = key_.data();
      cap_ = key_.size();
    }
  }

  std::string& key_;
  char* data_ = nullptr;
  size_t cap_ = 0;
  size_t len_ = 0;
};

void put_byte(KeyWriter& key, int64_t v) { key.byte(v); }

void put_int(KeyWriter& key, int64_t v) { key.raw(&v, sizeof(v)); }

// One writer per encoding of signature_layout.h: the boxed signature and the typed ones
// (convolution, mm, addmm) call the same writers, so each encoding's bytes are written in
// one place. The small ones are always inlined, as the writes they replace were (g++ -O3
// kept put_specialized_int and put_list_header out of line, a call per int argument).
C10_ALWAYS_INLINE void put_bool(KeyWriter& key, bool v) {
  put_byte(key, tag::kBool);
  put_byte(key, v);
}

C10_ALWAYS_INLINE void put_specialized_int(KeyWriter& key, int64_t v) {
  put_byte(key, tag::kInt);
  put_int(key, v);
}

C10_ALWAYS_INLINE void put_specialized_float(KeyWriter& key, double v) {
  put_byte(key, tag::kFloat);
  key.raw(&v, sizeof(v));
}

C10_ALWAYS_INLINE void put_list_header(KeyWriter& key, char list_tag, size_t size) {
  put_byte(key, list_tag);
  put_int(key, static_cast<int64_t>(size));
}

void put_symint(KeyWriter& key, const c10::SymInt& v, CallSignature* sig) {
  if (v.is_heap_allocated()) {
    sig->unsupported = "a symbolic int argument";
  } else {
    put_specialized_int(key, v.as_int_unchecked());
  }
}

// A SymInt[] holding plain ints, as an int list.
void put_int_list(KeyWriter& key, c10::SymIntArrayRef list, CallSignature* sig) {
  put_list_header(key, tag::kIntList, list.size());
  for (const c10::SymInt& x : list) {
    if (x.is_heap_allocated()) {
      sig->unsupported = "a symbolic int list argument";
      return;
    }
    put_int(key, x.as_int_unchecked());
  }
}

uint8_t size_class(int64_t v) { return v == 0 ? 0 : (v == 1 ? 1 : 2); }

// A GPU tensor's size class: small (launch-bound), medium, large (bandwidth-bound).
uint8_t gpu_size_class(int64_t numel) {
  return numel < kParallelGrain ? tag::kGpuSmall
                                : (numel < (int64_t{1} << 22) ? tag::kGpuMedium : tag::kGpuLarge);
}

// Where the runtime input being added comes from; `layout` is null on the hit path.
struct Position {
  std::vector<RuntimeSlot>* layout = nullptr;
  int arg = 0;
  int item = -1;

  void record(SlotKind kind, int64_t first, int64_t dim) const {
    if (layout) layout->push_back(RuntimeSlot{kind, arg, item, first, dim});
  }
};

void add_value_scalar(const c10::Scalar& s, bool specialize, CallSignature* sig, KeyWriter& key,
                      const Position& pos);

// A Python number passed where the schema says Tensor (`x + 3`) arrives as a 0-dim CPU
// "wrapped number" tensor; it is a value scalar (Python sees the number, and promotion
// treats it as one), read here without a dispatcher call.
std::optional<c10::Scalar> wrapped_number(const at::Tensor& t) {
  if (!t.unsafeGetTensorImpl()->is_wrapped_number() || !t.is_cpu()) return std::nullopt;
  switch (t.scalar_type()) {
    case c10::kLong: return c10::Scalar(*t.const_data_ptr<int64_t>());
    case c10::kDouble: return c10::Scalar(*t.const_data_ptr<double>());
    case c10::kBool: return c10::Scalar(*t.const_data_ptr<bool>());
    default: return std::nullopt;
  }
}

// Appends the tensor's specialized description and its guard values.
void add_tensor(const at::Tensor& t, CallSignature* sig, KeyWriter& key, int64_t* max_numel,
                const Position& pos, bool specialize) {
  if (!t.defined()) {
    put_byte(key, tag::kUndefinedTensor);
    return;
  }
  if (auto number = wrapped_number(t)) {
    put_byte(key, tag::kWrappedNumber);
    add_value_scalar(*number, specialize, sig, key, pos);
    return;
  }
  if (t.layout() != c10::kStrided || t.is_quantized() || t.is_conj() || t.is_neg() ||
      t.is_complex()) {
    sig->unsupported = "a non-strided, quantized, complex or conj/neg-bit tensor";
    return;
  }
  const int64_t dim = t.dim();
  put_byte(key, tag::kTensor);
  put_byte(key, static_cast<int64_t>(t.scalar_type()));
  put_byte(key, static_cast<int64_t>(t.device().type()));
  put_byte(key, t.device().index());
  put_byte(key, dim);
  auto sizes = t.sizes();
  auto strides = t.strides();
  for (int64_t d = 0; d < dim; ++d) {
    put_byte(key, size_class(sizes[d]) | (size_class(strides[d]) << 2));
  }
  // Layout class: contiguous, or the order of the strides (which dim is innermost).
  if (t.is_contiguous()) {
    put_byte(key, tag::kContiguous);
  } else {
    std::array<int8_t, 16> order{};
    const int64_t n = std::min<int64_t>(dim, 16);
    for (int64_t d = 0; d < n; ++d) order[d] = static_cast<int8_t>(d);
    std::stable_sort(order.begin(), order.begin() + n,
                     [&](int8_t a, int8_t b) { return strides[a] > strides[b]; });
    put_byte(key, t.is_non_overlapping_and_dense() ? tag::kDense : tag::kStrided);
    for (int64_t d = 0; d < n; ++d) put_byte(key, order[d]);
  }
  // Vectorized and Triton loads assume 16-byte alignment when it holds.
  const bool aligned = (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) == 0;
  put_byte(key, aligned ? tag::kAligned : tag::kUnaligned);
  if (memory_home(t.device()).is_cuda()) {  // a CUDA tensor is its own home
    // A Triton kernel's launch configuration (block sizes, warps) is tuned at compile time
    // on the call's sizes, and one tuned on a small call runs large ones slowly (H100,
    // 8192x8192 fp32, tuned at 64x64 against tuned at 8192x8192: softmax 0.386 against
    // 0.209 ms, sum(dim=0) 0.260 against 0.093: tools/bench_gpu_tuning.py). So each
    // tensor in GPU memory (a CUDA tensor, or a device's whose memory's home is CUDA: the
    // eagerc device on GPU memory) carries a coarse size class, and each class gets its
    // own tuned kernel. The home decides, not the dispatch key.
    put_byte(key, gpu_size_class(t.numel()));
  } else {
    // Host C++ kernels: the call's largest tensor picks OpenMP or not (end_signature).
    *max_numel = std::max(*max_numel, t.numel());
  }
  pos.record(SlotKind::Tensor, static_cast<int64_t>(sig->ints.size()), dim);
  append_tensor_guard_values(t, &sig->ints);
  sig->inputs.push_back(RuntimeInput{&t, c10::Scalar()});
}

void add_value_scalar(const c10::Scalar& s, bool specialize, CallSignature* sig, KeyWriter& key,
                      const Position& pos) {
  if (s.isBoolean()) {  // bools select code paths: always specialized
    put_bool(key, s.toBool());
    return;
  }
  if (s.isComplex()) {
    sig->unsupported = "a complex Scalar";
    return;
  }
  // 0 and 1 are specialized like sizes: they are the common defaults (alpha=1,
  // beta=1) and let Inductor drop the multiply and the runtime scalar read.
  const bool zero_or_one = s.isIntegral(false) ? (s.toLong() == 0 || s.toLong() == 1)
                                               : (s.toDouble() == 0.0 || s.toDouble() == 1.0);
  if (specialize || zero_or_one) {
    if (s.isIntegral(false)) {
      put_specialized_int(key, s.toLong());
    } else {
      put_specialized_float(key, s.toDouble());
    }
    return;
  }
  if (s.isIntegral(false)) {
    put_byte(key, tag::kLiftedInt);
    pos.record(SlotKind::Int, static_cast<int64_t>(sig->ints.size()), 0);
    sig->ints.push_back(s.toLong());
  } else {
    put_byte(key, tag::kLiftedFloat);
    pos.record(SlotKind::Float, static_cast<int64_t>(sig->floats.size()), 0);
    sig->floats.push_back(s.toDouble());
  }
  sig->inputs.push_back(RuntimeInput{nullptr, s});
}

// Values that shape the computation go into the key as they are.
void add_specialized(const c10::IValue& v, CallSignature* sig, KeyWriter& key) {
  if (v.isNone()) {
    put_byte(key, tag::kNone);
  } else if (v.isInt()) {
    put_specialized_int(key, v.toInt());
  } else if (v.isBool()) {
    put_bool(key, v.toBool());
  } else if (v.isSymInt()) {
    put_symint(key, v.toSymInt(), sig);
  } else if (v.isIntList()) {
    auto list = v.toIntList();
    put_list_header(key, tag::kIntList, list.size());
    for (int64_t x : list) put_int(key, x);
  } else if (v.isBoolList()) {
    auto list = v.toBoolList();
    put_list_header(key, tag::kBoolList, list.size());
    for (bool x : list) put_byte(key, x);
  } else if (v.isList()) {  // SymInt[] holding plain ints
    auto list = v.toListRef();
    put_list_header(key, tag::kIntList, list.size());
    for (const auto& x : list) {
      if (x.isInt()) {
        put_int(key, x.toInt());
      } else if (x.isSymInt() && !x.toSymInt().is_heap_allocated()) {
        put_int(key, x.toSymInt().as_int_unchecked());
      } else {
        sig->unsupported = "a symbolic int list argument";
        return;
      }
    }
  } else if (v.isString()) {
    put_byte(key, tag::kString);
    const std::string& text = v.toStringRef();
    key.raw(text.data(), text.size());
    put_byte(key, 0);
  } else if (v.isDevice()) {
    put_byte(key, tag::kDevice);
    put_byte(key, static_cast<int64_t>(v.toDevice().type()));
    put_byte(key, v.toDevice().index());
  } else if (v.isDouble()) {
    put_specialized_float(key, v.toDouble());
  } else {
    sig->unsupported = "an argument value of an unsupported type";
  }
}

}  // namespace

thread_local char forced_size_class = 0;

void set_forced_size_class(char size_class) { forced_size_class = size_class; }

std::vector<RuntimeSlot> tensor_inputs_layout(const std::vector<int64_t>& ranks) {
  std::vector<RuntimeSlot> layout;
  int64_t first = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    layout.push_back(RuntimeSlot{SlotKind::Tensor, static_cast<int>(i), -1, first, ranks[i]});
    first += layout.back().int_slots();
  }
  return layout;
}

namespace {

// What every signature writes around its arguments: a cleared signature first, the size
// class byte last.
void begin_signature(CallSignature* sig) {
  sig->inputs.clear();
  sig->ints.clear();
  sig->floats.clear();
  sig->unsupported = nullptr;
}

void end_signature(KeyWriter& key, int64_t max_numel, CallSignature* sig) {
  sig->parallel = max_numel >= kParallelGrain;
  if (forced_size_class != 0 && max_numel > 0) sig->parallel = forced_size_class == tag::kParallel;
  put_byte(key, sig->parallel ? tag::kParallel : tag::kSerial);
  key.finish();
}

// The typed kernels' leading tensor arguments (positions 0, 1, ...), in the boxed key's form.
void add_leading_tensors(std::initializer_list<const at::Tensor*> tensors, bool specialize_values,
                         CallSignature* sig, KeyWriter& key, int64_t* max_numel) {
  int position = 0;
  for (const at::Tensor* t : tensors) {
    if (sig->unsupported) return;
    add_tensor(*t, sig, key, max_numel, Position{nullptr, position++, -1}, specialize_values);
  }
}

}  // namespace

void compute_signature(const OpPlan& plan, const torch::jit::Stack& stack,
                       bool specialize_values, CallSignature* sig,
                       std::vector<RuntimeSlot>* layout) {
  KeyWriter key(sig->key);
  begin_signature(sig);
  const size_t n = plan.kinds.size();
  const size_t base = stack.size() - n;
  int64_t max_numel = 0;
  if (layout) layout->clear();
  for (size_t i = 0; i < n && !sig->unsupported; ++i) {
    const c10::IValue& v = stack[base + i];
    Position pos{layout, static_cast<int>(i), -1};
    switch (plan.kinds[i]) {
      case ArgKind::Tensor:
        add_tensor(v.toTensor(), sig, key, &max_numel, pos, specialize_values);
        break;
      case ArgKind::OptionalTensor:
        if (v.isNone()) put_byte(key, tag::kUndefinedTensor);
        else add_tensor(v.toTensor(), sig, key, &max_numel, pos, specialize_values);
        break;
      case ArgKind::TensorList: {
        // Tensor lists arrive as a list of IValues; the pointers stay valid
        // while the stack holds the list.
        const auto& list = v.toListRef();
        put_list_header(key, tag::kTensorList, list.size());
        for (size_t j = 0; j < list.size(); ++j) {
          pos.item = static_cast<int>(j);
          add_tensor(list[j].toTensor(), sig, key, &max_numel, pos, specialize_values);
        }
        break;
      }
      case ArgKind::OptionalTensorList: {
        const auto& list = v.toListRef();
        put_list_header(key, tag::kTensorList, list.size());
        for (size_t j = 0; j < list.size(); ++j) {
          pos.item = static_cast<int>(j);
          if (list[j].isNone()) put_byte(key, tag::kUndefinedTensor);
          else add_tensor(list[j].toTensor(), sig, key, &max_numel, pos, specialize_values);
        }
        break;
      }
      case ArgKind::Scalar:
      case ArgKind::Float:
        add_value_scalar(v.toScalar(), specialize_values, sig, key, pos);
        break;
      case ArgKind::OptionalScalar:
      case ArgKind::OptionalFloat:
        if (v.isNone()) put_byte(key, tag::kNone);
        else add_value_scalar(v.toScalar(), specialize_values, sig, key, pos);
        break;
      case ArgKind::Specialized:
        add_specialized(v, sig, key);
        break;
      case ArgKind::Generator:
        if (!v.isNone()) sig->unsupported = "an explicit Generator argument";
        break;
      case ArgKind::Unsupported:
        sig->unsupported = "an unsupported argument type";
        break;
    }
  }
  end_signature(key, max_numel, sig);
}

void compute_convolution_signature(const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor* bias, c10::SymIntArrayRef stride,
                                   c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                   bool transposed, c10::SymIntArrayRef output_padding,
                                   const c10::SymInt& groups, bool specialize_values,
                                   CallSignature* sig) {
  KeyWriter key(sig->key);
  begin_signature(sig);
  int64_t max_numel = 0;
  add_tensor(input, sig, key, &max_numel, Position{nullptr, 0, -1}, specialize_values);
  add_tensor(weight, sig, key, &max_numel, Position{nullptr, 1, -1}, specialize_values);
  if (bias) add_tensor(*bias, sig, key, &max_numel, Position{nullptr, 2, -1}, specialize_values);
  else put_byte(key, tag::kUndefinedTensor);
  put_int_list(key, stride, sig);
  put_int_list(key, padding, sig);
  put_int_list(key, dilation, sig);
  put_bool(key, transposed);
  put_int_list(key, output_padding, sig);
  put_symint(key, groups, sig);
  end_signature(key, max_numel, sig);
}


void compute_mm_signature(const at::Tensor& self, const at::Tensor& mat2, bool specialize_values,
                          CallSignature* sig) {
  KeyWriter key(sig->key);
  begin_signature(sig);
  int64_t max_numel = 0;
  add_leading_tensors({&self, &mat2}, specialize_values, sig, key, &max_numel);
  end_signature(key, max_numel, sig);
}

void compute_addmm_signature(const at::Tensor& self, const at::Tensor& mat1,
                             const at::Tensor& mat2, const c10::Scalar& beta,
                             const c10::Scalar& alpha, bool specialize_values,
                             CallSignature* sig) {
  KeyWriter key(sig->key);
  begin_signature(sig);
  int64_t max_numel = 0;
  add_leading_tensors({&self, &mat1, &mat2}, specialize_values, sig, key, &max_numel);
  if (!sig->unsupported) {
    add_value_scalar(beta, specialize_values, sig, key, Position{nullptr, 3, -1});
  }
  if (!sig->unsupported) {
    add_value_scalar(alpha, specialize_values, sig, key, Position{nullptr, 4, -1});
  }
  end_signature(key, max_numel, sig);
}

}  // namespace eagerc
