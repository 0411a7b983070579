#include "registration.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <set>

#include "host_alias.h"
#include "kernel_holder.h"
#include "unboxed_convolution.h"
#include "unboxed_mm.h"

namespace eagerc {
namespace {

std::mutex g_mu;
std::map<std::pair<std::string, c10::DispatchKey>, std::shared_ptr<OpState>> g_states;
std::map<c10::DispatchKey, std::unique_ptr<torch::Library>> g_libraries;

std::optional<c10::OperatorHandle> find_op(const std::string& qualified) {
  // "aten::add.Tensor" -> ("aten::add", "Tensor")
  auto dot = qualified.find('.', qualified.find("::") + 2);
  std::string name = qualified.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

// A view returns an alias of an argument without writing it.
bool returns_view(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() && !ret.alias_info()->isWrite()) return true;
  }
  return false;
}

// An attention op whose only draw is its dropout (`dropout_p`): Inductor calls its ATen
// kernel as an extern, so the draw is that kernel's own.
bool draws_in_attention_kernel(const c10::FunctionSchema& schema) {
  return schema.argumentIndexWithName("dropout_p").has_value();
}

// Warnings the dispatcher prints when a kernel overrides an existing one are
// expected in override mode: drop them while registering.
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// Calls fn(qualified name, handle) for every aten op with a schema not in `deny`
// (a qualified name, or an op name covering all its overloads).
template <typename Fn>
void for_each_aten_op(const std::vector<std::string>& deny, Fn fn) {
  std::set<std::string> denied(deny.begin(), deny.end());
  for (const auto& opname : c10::Dispatcher::singleton().getAllOpNames()) {
    if (opname.name.rfind("aten::", 0) != 0) continue;
    std::string qualified =
        opname.name + (opname.overload_name.empty() ? "" : "." + opname.overload_name);
    if (denied.count(qualified) || denied.count(opname.name)) continue;
    auto handle = c10::Dispatcher::singleton().findOp(opname);
    if (!handle || !handle->hasSchema()) continue;
    fn(qualified, *handle);
  }
}

}  // namespace

std::vector<std::string> servable_ops(c10::DispatchKey key, bool new_device, RandomOps random,
                                      const std::vector<std::string>& deny) {
  std::vector<std::string> out;
  // A new device whose memory is GPU memory also compiles what only CUDA has kernels for
  // (memory-efficient attention and its backward, which Inductor calls as externs).
  const bool cuda_home =
      new_device && memory_home(c10::Device(c10::dispatchKeyToDeviceType(key), 0)).type() ==
                        c10::DeviceType::CUDA;
  for_each_aten_op(deny, [&](const std::string& qualified, const c10::OperatorHandle& op) {
    const c10::OperatorHandle* handle = &op;
    if (!new_device && !handle->hasKernelForDispatchKey(key)) return;
    // A new device compiles what the CPU target has kernels for (composite ops
    // decompose into those), except what its runtime hand-writes.
    if (new_device && (handle->hasKernelForDispatchKey(key) ||
                       handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
                       !(handle->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
                         handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                         (cuda_home && handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA))))) {
      return;
    }
    const auto& schema = handle->schema();
    if (returns_view(schema)) return;
    if (handle->hasTag(at::Tag::inplace_view) || handle->hasTag(at::Tag::data_dependent_output) ||
        handle->hasTag(at::Tag::dynamic_output_shape)) {
      return;
    }
    if (handle->hasTag(at::Tag::nondeterministic_seeded) && random != RandomOps::Compiled &&
        !(random == RandomOps::InHomeExterns && draws_in_attention_kernel(schema))) {
      return;
    }
    if (!make_op_plan(schema).unsupported.empty()) return;
    out.push_back(qualified);
  });
  return out;
}

std::vector<std::string> aliasable_ops(c10::DispatchKey key, const std::vector<std::string>& deny) {
  std::vector<std::string> out;
  // GPU memory: CUDA's own kernels count too. Its fused multi-tensor kernels of the
  // optimizers' Scalar[] forms (_foreach_div_.ScalarList, _foreach_addcdiv_.ScalarList,
  // which AdamW calls every step) have no CPU kernel, only a composite that loops one
  // kernel per tensor, and a Scalar[] is no argument a compiled kernel takes.
  const c10::Device home = memory_home(c10::Device(c10::dispatchKeyToDeviceType(key), 0));
  const bool cuda_home = home.type() == c10::DeviceType::CUDA;
  for_each_aten_op(deny, [&](const std::string& qualified, const c10::OperatorHandle& handle) {
    // A data-dependent op may already carry a compiled holder (as the functional op of
    // its out= form, e.g. index.Tensor): it is re-registered to run on aliases.
    const bool data_dependent = handle.hasTag(at::Tag::dynamic_output_shape) ||
                                handle.hasTag(at::Tag::data_dependent_output);
    const bool home_kernel = handle.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
                             (cuda_home && handle.hasKernelForDispatchKey(c10::DispatchKey::CUDA));
    if (!home_kernel ||
        (handle.hasKernelForDispatchKey(key) && !data_dependent) ||
        handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        returns_view(handle.schema()) || handle.hasTag(at::Tag::inplace_view)) {
      return;
    }
    out.push_back(qualified);
  });
  return out;
}

std::pair<std::vector<std::string>, std::vector<std::pair<std::string, std::string>>>
enable_ops(c10::DispatchKey key, const std::vector<std::string>& ops, const ServingOptions& options) {
  TORCH_CHECK(!options.run_on_aliases || options.host_aliases,
              "eagerc: ops can run on CPU aliases only on a device whose memory is host memory");
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> registered;
  std::vector<std::pair<std::string, std::string>> skipped;
  auto& lib = g_libraries[key];
  if (!lib) {
    lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  }
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard guard(&silent);
  std::set<std::string> registered_here(ops.begin(), ops.end());
  for (const auto& qualified : ops) {
    auto handle = find_op(qualified);
    if (!handle) {
      skipped.emplace_back(qualified, "no such operator");
      continue;
    }
    auto& state = g_states[{qualified, key}];
    if (!state) state = std::make_shared<OpState>(*handle, key);
    state->run_on_aliases = options.run_on_aliases;
    state->host_aliases = options.host_aliases;
    if (!state->plan.unsupported.empty() && !options.run_on_aliases) {
      skipped.emplace_back(qualified, "unsupported " + state->plan.unsupported);
      continue;
    }
    std::string name = qualified.substr(qualified.find("::") + 2);
    // The eagerc device, whose memory has a home (host or GPU memory): the typed kernels'
    // hit path runs the artifact on aliases of the home device (CPU aliases; on GPU memory
    // CUDA aliases, where cuBLAS and cuDNN run), as the boxed holder would.
    const bool device_with_home = key == c10::DispatchKey::PrivateUse1 && options.host_aliases &&
                                  !options.run_on_aliases;
    // mm and addmm, typed: in override mode on CPU and CUDA (no boxing of the arguments
    // onto a stack per call), and on the eagerc device as above.
    const bool override_mode = !options.host_aliases && !options.new_device;
    const bool typed_matmul =
        (qualified == "aten::mm" || qualified == "aten::addmm") &&
        ((key == c10::DispatchKey::CPU && override_mode &&
          memory_home(c10::Device(c10::DeviceType::CPU)).is_cpu()) ||
         (key == c10::DispatchKey::CUDA && override_mode) || device_with_home);
    if (qualified == "aten::convolution" && device_with_home) {
      lib->impl(name.c_str(), unboxed_convolution_kernel(state));  // see unboxed_convolution.h
    } else if (typed_matmul) {
      lib->impl(name.c_str(), qualified == "aten::mm" ? unboxed_mm_kernel(state)
                                                      : unboxed_addmm_kernel(state));  // unboxed_mm.h
    } else {
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                  std::make_unique<KernelHolder>(state)));
    }
    registered.push_back(qualified);
    // An out= op runs through its functional op, which must be served too. One run on
    // aliases runs its home's out= kernel instead: its functional is served as
    // servable_ops says (a random one, bernoulli of bernoulli.out, stays the home's).
    if (state->functional && !options.run_on_aliases) {
      const auto& f = state->functional->operator_name();
      std::string fq = f.name + (f.overload_name.empty() ? "" : "." + f.overload_name);
      auto& fstate = g_states[{fq, key}];
      if (!fstate) fstate = std::make_shared<OpState>(*state->functional, key);
      fstate->host_aliases = options.host_aliases;
      // A CompositeImplicitAutograd op must keep decomposing (its autograd comes from
      // the pieces), so it never gets a backend kernel.
      // A CompositeExplicitAutograd functional (abs, whose kernel calls abs.out) is served
      // on the key too: the out= op, traced with symbolic sizes, cannot always compile
      // (its resize of `out`), while the functional op does.
      bool has_kernel =
          !state->functional->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
          (options.new_device || state->functional->hasKernelForDispatchKey(key) ||
           state->functional->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd));
      if (fstate->plan.unsupported.empty() && has_kernel && !registered_here.count(fq)) {
        std::string fname = fq.substr(fq.find("::") + 2);
        lib->impl(fname.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                     std::make_unique<KernelHolder>(fstate)));
        registered_here.insert(fq);
      }
      // Only a functional op that eagerc serves may carry the out= op: a native
      // functional kernel may itself call the out= op (at::native::abs -> abs_out).
      state->functional_served = registered_here.count(fq) > 0 && has_kernel;
    }
  }
  return {registered, skipped};
}

void disable_key(c10::DispatchKey key) {
  std::lock_guard<std::mutex> lock(g_mu);
  // Destroying the Library deregisters every kernel it registered.
  g_libraries.erase(key);
}

bool is_enabled(c10::DispatchKey key) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_libraries.count(key) > 0;
}

std::vector<std::shared_ptr<OpState>> all_op_states() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::shared_ptr<OpState>> out;
  for (const auto& kv : g_states) out.push_back(kv.second);
  return out;
}

}  // namespace eagerc
