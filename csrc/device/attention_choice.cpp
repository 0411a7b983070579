// Which scaled_dot_product_attention implementation the device's tensors take.
//
// ATen's composite scaled_dot_product_attention asks a per-device stub
// (_fused_sdp_choice_stub) for a fused backend and takes the unfused math path (matmul,
// softmax, matmul: seven ops and two score-sized temporaries) on a device that has no
// stub. On host memory the CPU's choice applies: the same checks (shapes, strides, mask,
// dropout, head size, torch.backends' flags), and its fused kernel,
// _scaled_dot_product_flash_attention_for_cpu, is what the device's kernel holder then
// serves (Inductor calls ATen's CPU kernel for it). On GPU memory the CUDA's choice applies
// where the composite's branch for it is device-neutral: memory-efficient attention (what
// CUDA picks for fp32, and for masks flash cannot take), served as an extern to CUDA's
// kernel, in inference (see below). Flash and cuDNN take the math path: the composite's
// flash branch runs the CPU kernel on any device that is not CUDA.
//
// The eagerc device registers the choice with its runtime. A vendor's PrivateUse1 device
// that eagerc serves on host memory gets it when enabled (serve_attention_choice), unless
// its runtime registered a choice of its own: without one ATen takes the math path, five
// ops where the CPU's choice has one.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/from_blob.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <array>
#include <atomic>
#include <type_traits>
#include <cstring>

#include "host_alias.h"
#include "device/runtime.h"

namespace eagerc::device {
namespace {

// The CPU's choice reads only metadata, so it sees CPU stand-ins with each tensor's
// sizes, strides and dtype over a dummy address: no aliasing of real storage, and it works
// for fake tensors too (warm_cache's discovery runs models under FakeTensorMode).
// requires_grad is kept: the CPU's choice refuses fused kernels for a mask that needs a
// gradient, and without it T5's attention in grad mode picked one that is not
// differentiable with respect to attn_mask.
at::Tensor cpu_standin(const at::Tensor& t) {
  alignas(64) static char never_read[64];
  at::Tensor standin = at::from_blob(never_read, t.sizes(), t.strides(),
                                     at::TensorOptions().dtype(t.scalar_type()).device(c10::kCPU));
  return t.requires_grad() ? standin.requires_grad_() : standin;
}

// The same over no memory on `home` (a GPU): for_blob with a target device does not ask
// CUDA where the (dummy) address lives. requires_grad is kept: CUDA's checks read it.
at::Tensor gpu_standin(const at::Tensor& t, c10::Device home) {
  alignas(64) static char never_read[64];
  at::Tensor standin = at::for_blob(never_read, t.sizes())
                           .strides(t.strides())
                           .target_device(home)
                           .options(at::TensorOptions().dtype(t.scalar_type()).device(home))
                           .make_tensor();
  return t.requires_grad() ? standin.requires_grad_() : standin;
}

bool flash_for_cpu_served() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::_scaled_dot_product_flash_attention_for_cpu", "");
  return op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

bool symbolic(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

// What the home's choice reads: each tensor's metadata (no data), the arguments, grad
// mode, and the context's SDP settings (torch.backends.cuda.enable_*_sdp, sdpa_kernel's
// priority order, deterministic algorithms). Equal words, equal choice.
using ChoiceWords = c10::SmallVector<int64_t, 64>;

void add_tensor(ChoiceWords& w, const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) {
    w.push_back(-1);
    return;
  }
  w.push_back(static_cast<int64_t>(t->scalar_type()));
  w.push_back(t->requires_grad());
  w.push_back(t->device().index());
  w.push_back(t->dim());
  for (int64_t size : t->sizes()) w.push_back(size);
  for (int64_t stride : t->strides()) w.push_back(stride);
}

ChoiceWords choice_words(c10::Device home, const at::Tensor& query, const at::Tensor& key,
                         const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
                         double dropout_p, bool is_causal, std::optional<double> scale,
                         bool enable_gqa) {
  ChoiceWords w;
  w.push_back(static_cast<int64_t>(home.type()));
  for (const at::Tensor* t : {&query, &key, &value}) add_tensor(w, *t);
  add_tensor(w, attn_mask);
  int64_t bits = 0;
  std::memcpy(&bits, &dropout_p, sizeof bits);
  w.push_back(bits);
  const double scale_value = scale.value_or(0.0);
  std::memcpy(&bits, &scale_value, sizeof bits);
  w.push_back(scale.has_value());
  w.push_back(bits);
  const auto& ctx = at::globalContext();
  w.push_back(is_causal | (enable_gqa << 1) | (at::GradMode::is_enabled() << 2) |
              (ctx.userEnabledFlashSDP() << 3) | (ctx.userEnabledMemEfficientSDP() << 4) |
              (ctx.userEnabledMathSDP() << 5) | (ctx.userEnabledCuDNNSDP() << 6) |
              (ctx.userEnabledOverrideableSDP() << 7) | (ctx.deterministicAlgorithms() << 8) |
              (ctx.deterministicAlgorithmsWarnOnly() << 9));
  for (const auto backend : at::globalContext().sDPPriorityOrder()) w.push_back(static_cast<int64_t>(backend));
  return w;
}

// The home's choice for the device's tensors, before the device's own rule below.
int64_t home_choice(c10::Device home, const at::Tensor& query, const at::Tensor& key,
                    const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
                    double dropout_p, bool is_causal, std::optional<double> scale,
                    bool enable_gqa) {
  const bool gpu_home = home.type() == c10::DeviceType::CUDA;
  auto standin = [&](const at::Tensor& t) { return gpu_home ? gpu_standin(t, home) : cpu_standin(t); };
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = standin(*attn_mask);
  // A dispatch mode (FakeTensorMode) must not see the stand-ins.
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  return at::_fused_sdp_choice(standin(query), standin(key), standin(value), mask, dropout_p,
                               is_causal, scale, enable_gqa);
}

// The home's choice, kept per thread for the last few distinct calls: a transformer asks
// the same question in every layer, and the answer (four stand-in tensors and the home's
// checks, a few microseconds of each attention call on GPU memory) is a function of the
// words above. An error answer is never kept: each such call asks again, and raises or
// warns as native eager does.
int64_t remembered_home_choice(c10::Device home, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
                               double dropout_p, bool is_causal, std::optional<double> scale,
                               bool enable_gqa) {
  struct Entry {
    ChoiceWords words;
    int64_t choice = 0;
  };
  thread_local std::array<Entry, 8> entries;
  thread_local size_t next = 0;
  ChoiceWords words = choice_words(home, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  for (const Entry& e : entries) {
    if (e.words.size() == words.size() &&
        std::memcmp(e.words.data(), words.data(), words.size() * sizeof(int64_t)) == 0) {
      return e.choice;
    }
  }
  const int64_t choice = home_choice(home, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  if (choice != static_cast<int64_t>(sdp::SDPBackend::error)) {
    entries[next] = Entry{std::move(words), choice};
    next = (next + 1) % entries.size();
  }
  return choice;
}

int64_t attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  const auto math = static_cast<int64_t>(sdp::SDPBackend::math);
  const c10::Device home = memory_home(query.device());
  const bool gpu_home = home.type() == c10::DeviceType::CUDA;
  if ((home.type() != c10::DeviceType::CPU && !gpu_home) || symbolic(query) || symbolic(key) ||
      symbolic(value) || (has_mask && symbolic(*attn_mask))) {
    return math;
  }
  const int64_t choice = remembered_home_choice(home, query, key, value, attn_mask, dropout_p,
                                                is_causal, scale, enable_gqa);
  // The CPU's fused attention is served on the device while eagerc serves it (a vendor's
  // device after eagerc.disable has its own kernels, or none: the math path, as without
  // this choice).
  if (!gpu_home && choice == static_cast<int64_t>(sdp::SDPBackend::flash_attention) &&
      !flash_for_cpu_served()) {
    return math;
  }
  // Inference only: with a gradient to record the math path stays. The backward of
  // memory-efficient attention on the device is not verified on a GPU: a registered
  // PrivateUse1 device is torch's accelerator, and the engine then asserts in a CUDA
  // reference backward (pytorch/pytorch#161129), so the test's reference cannot run.
  const bool records_grad = at::GradMode::is_enabled() &&
                            (query.requires_grad() || key.requires_grad() || value.requires_grad());
  const bool neutral =
      (choice == static_cast<int64_t>(sdp::SDPBackend::efficient_attention) && !records_grad) ||
      choice == static_cast<int64_t>(sdp::SDPBackend::error);
  if (!gpu_home || neutral) return choice;
  // The math path in place of flash/cuDNN, unless the user turned it off (sdpa_kernel).
  return at::globalContext().userEnabledMathSDP() ? math
                                                  : static_cast<int64_t>(sdp::SDPBackend::error);
}

// Whether attention_choice serves PrivateUse1 (registered by the eagerc device's runtime,
// or for a vendor's device by serve_attention_choice).
std::atomic<bool> g_registered{false};

}  // namespace

void register_attention_choice() {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&attention_choice);
  g_registered.store(true);
}

// The choice registered for PrivateUse1, or null. The stub's one data member is its
// DispatchStubImpl, private, whose pointers are public: read back where
// set_privateuse1_dispatch_ptr writes (is_device_supported is inline and calls a member
// libtorch exports under another signature, built with its CPU-capability macros).
const void* privateuse1_choice() {
  using Stub = decltype(at::native::_fused_sdp_choice_stub);
  static_assert(std::is_standard_layout_v<Stub> && sizeof(Stub) == sizeof(at::native::DispatchStubImpl));
  return reinterpret_cast<const at::native::DispatchStubImpl*>(&at::native::_fused_sdp_choice_stub)
      ->privateuse1_dispatch_ptr;
}

bool serve_attention_choice() {
  if (g_registered.load()) return true;
  // A choice the device's own runtime registered is the vendor's to keep.
  if (privateuse1_choice() != nullptr) return false;
  register_attention_choice();
  return true;
}

}  // namespace eagerc::device
