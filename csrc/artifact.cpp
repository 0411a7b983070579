#include "artifact.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "direct_alloc.h"
#include "matmul_precision.h"

namespace eagerc {

namespace {

// A plan launcher library loaded for one plan artifact, which runs the plans of the other
// artifacts built from the same library (eagerc_open_plan): each artifact is that library
// with its plan appended (eagerc/codegen/triton/plan_build.py), and loading each file as a library
// of its own gives every plan a copy of the launcher's code and statics, so a forward that
// cycles through many kernels runs each copy cold (on an H200, a ResNet-50 convolution cost
// 3 µs more than native's inside the forward with one copy, 6-9 µs with a copy per plan).
// EAGERC_GPU_SHARED_LAUNCHER=0 loads every artifact as a library of its own.
struct SharedLauncher {
  std::string image;  // the library's bytes, without a plan
  Artifact::PlanGuardFn guard;
  Artifact::PlanEntryFn entry;
  void* (*open)(const char*, const char**);
};

bool shared_launchers_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("EAGERC_GPU_SHARED_LAUNCHER");
    return value == nullptr || std::string(value) != "0";
  }();
  return enabled;
}

std::mutex& launchers_mutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

std::vector<SharedLauncher>& launchers() {
  static auto* all = new std::vector<SharedLauncher>();
  return *all;
}

// The bytes of a plan artifact's file before its appended plan (payload.cpp's layout: the
// appended bytes' size, then the magic "EAGERCP1", end the file); empty for any other file.
std::string launcher_image(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return {};
  const auto end = static_cast<uint64_t>(file.tellg());
  uint64_t tail[2] = {0, 0};
  if (end < 16) return {};
  file.seekg(static_cast<std::streamoff>(end - 16));
  file.read(reinterpret_cast<char*>(tail), 16);
  if (!file || std::memcmp(&tail[1], "EAGERCP1", 8) != 0 || tail[0] < 32 || tail[0] > end) return {};
  std::string image(end - tail[0], '\0');
  file.seekg(0);
  file.read(image.data(), static_cast<std::streamsize>(image.size()));
  return file ? image : std::string();
}

}  // namespace

bool Artifact::open_in_shared_launcher(const std::string& path, const std::string& image) {
  if (image.empty()) return false;
  std::lock_guard<std::mutex> lock(launchers_mutex());
  for (const SharedLauncher& launcher : launchers()) {
    if (launcher.image != image) continue;
    const char* error = nullptr;
    plan_ = launcher.open(path.c_str(), &error);
    TORCH_CHECK(plan_ != nullptr, "eagerc: compiled kernel ", path, " is broken: ",
                error != nullptr ? error : "no plan");
    plan_guard_ = launcher.guard;
    plan_entry_ = launcher.entry;
    return true;
  }
  return false;
}

Artifact::Artifact(std::string variant_id, const std::string& path, size_t num_outputs,
                   std::vector<Pinned> pinned)
    : variant_id_(std::move(variant_id)), path_(path), num_outputs_(num_outputs),
      pinned_(std::move(pinned)) {
  // Read once: the image finds a launcher already loaded, or registers this library as one.
  std::string image = shared_launchers_enabled() ? launcher_image(path) : std::string();
  if (open_in_shared_launcher(path, image)) return;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle, "eagerc: cannot load compiled kernel ", path, ": ", dlerror());
  guard_ = reinterpret_cast<GuardFn>(dlsym(handle, "eagerc_guard"));
  entry_ = reinterpret_cast<EntryFn>(dlsym(handle, "eagerc_entry"));
  TORCH_CHECK(guard_ && entry_, "eagerc: compiled kernel ", path,
              " lacks eagerc_guard/eagerc_entry; it was not built by this eagerc version.");
  // A library that reads its kernels' launch plan from its own file (eagerc's plan
  // launcher) says here whether it could: a broken one fails to load, and is rebuilt.
  using LoadErrorFn = const char* (*)();
  if (auto load_error = reinterpret_cast<LoadErrorFn>(dlsym(handle, "eagerc_load_error"))) {
    const char* error = load_error();
    TORCH_CHECK(error == nullptr, "eagerc: compiled kernel ", path, " is broken: ", error);
  }
  borrowed_entry_ = reinterpret_cast<EntryFn>(dlsym(handle, "eagerc_entry_borrowed"));
  offer_direct_allocation(handle);
  offer_matmul_precision(handle);
  auto open = reinterpret_cast<void* (*)(const char*, const char**)>(dlsym(handle, "eagerc_open_plan"));
  auto plan_guard = reinterpret_cast<PlanGuardFn>(dlsym(handle, "eagerc_plan_guard"));
  auto plan_entry = reinterpret_cast<PlanEntryFn>(dlsym(handle, "eagerc_plan_entry_borrowed"));
  if (!image.empty() && open != nullptr && plan_guard != nullptr && plan_entry != nullptr) {
    // This library runs the plans of the artifacts built from it that load after it.
    std::lock_guard<std::mutex> lock(launchers_mutex());
    launchers().push_back(SharedLauncher{std::move(image), plan_guard, plan_entry, open});
  }
}

namespace {

// Lifted scalars travel as 0-dim CPU tensors, as Inductor's wrapper expects. Reusing
// one per position and thread makes passing a scalar a store instead of an
// allocation; the wrapper reads it once (item) and keeps no reference.
at::Tensor& scalar_slot(size_t index, bool integral, const c10::Scalar& value) {
  // A deque: a slot stays where it is while later ones are added (borrowed handles point at it).
  thread_local std::deque<at::Tensor> longs, doubles;
  auto& slots = integral ? longs : doubles;
  while (slots.size() <= index) {
    slots.push_back(at::empty({}, at::TensorOptions().dtype(integral ? at::kLong : at::kDouble)));
  }
  at::Tensor& slot = slots[index];
  if (integral) *slot.data_ptr<int64_t>() = value.toLong();
  else *slot.data_ptr<double>() = value.toDouble();
  return slot;
}

}  // namespace

c10::SmallVector<at::Tensor, 4> Artifact::run(const CallSignature& sig) const {
  // A compiled wrapper's entry steals the input handles (it deletes them), so each is a
  // fresh heap at::Tensor sharing the caller's TensorImpl: no data is copied. A plan
  // launcher's borrowing entry reads the at::Tensor objects themselves, which outlive it.
  c10::SmallVector<AtenTensorOpaque*, 8> in;
  in.reserve(sig.inputs.size());
  size_t n_scalars = 0;
  const bool borrow = borrowed_entry_ != nullptr || plan_ != nullptr;
  for (const RuntimeInput& input : sig.inputs) {
    const at::Tensor* tensor = input.tensor;
    if (!tensor) {
      const c10::Scalar& s = input.scalar;
      tensor = &scalar_slot(n_scalars++, s.isIntegral(false), s);
    }
    in.push_back(reinterpret_cast<AtenTensorOpaque*>(borrow ? const_cast<at::Tensor*>(tensor)
                                                            : new at::Tensor(*tensor)));
  }
  c10::SmallVector<AtenTensorOpaque*, 4> out(num_outputs_, nullptr);
  try {
    if (plan_ != nullptr) {
      plan_entry_(plan_, in.data(), out.data());
    } else {
      (borrow ? borrowed_entry_ : entry_)(in.data(), out.data());
    }
  } catch (const std::exception&) {
    // The wrapper turns a failed allocation's error code into its own generic error (with
    // a temporary file's name); the allocation's own exception is native eager's.
    if (std::exception_ptr original = take_allocation_error()) std::rethrow_exception(original);
    throw;
  }
  c10::SmallVector<at::Tensor, 4> results;
  results.reserve(num_outputs_);
  for (AtenTensorOpaque* h : out) {
    if (!h) {  // an output the op leaves undefined (e.g. a gradient not asked for)
      results.emplace_back();
      continue;
    }
    at::Tensor* t = reinterpret_cast<at::Tensor*>(h);
    results.push_back(std::move(*t));
    delete t;
  }
  return results;
}

const Artifact* load_artifact(const std::string& variant_id, const std::string& path,
                              size_t num_outputs, std::vector<Artifact::Pinned> pinned) {
  static std::mutex mu;
  static auto* loaded = new std::unordered_map<std::string, std::unique_ptr<Artifact>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(path);
  if (it != loaded->end()) return it->second.get();
  auto artifact = std::make_unique<Artifact>(variant_id, path, num_outputs, std::move(pinned));
  const Artifact* raw = artifact.get();
  loaded->emplace(path, std::move(artifact));
  return raw;
}

}  // namespace eagerc
