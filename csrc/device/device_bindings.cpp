#include "device/device_bindings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <torch/csrc/Generator.h>

#include "device/runtime.h"

namespace py = pybind11;

namespace eagerc::device {
namespace {

// DeviceStats, flat under torch.cuda.memory_stats's names ("allocated_bytes.all.current").
std::map<std::string, int64_t> memory_stats(int index) {
  const auto stats = host_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(index));
  std::map<std::string, int64_t> flat;
  auto add_stat = [&](const std::string& name, const c10::CachingAllocator::Stat& stat) {
    flat[name + ".current"] = stat.current;
    flat[name + ".peak"] = stat.peak;
    flat[name + ".allocated"] = stat.allocated;
    flat[name + ".freed"] = stat.freed;
  };
  const std::pair<const char*, const c10::CachingAllocator::StatArray*> arrays[] = {
      {"allocation", &stats.allocation},       {"segment", &stats.segment},
      {"active", &stats.active},               {"inactive_split", &stats.inactive_split},
      {"allocated_bytes", &stats.allocated_bytes}, {"reserved_bytes", &stats.reserved_bytes},
      {"active_bytes", &stats.active_bytes},   {"inactive_split_bytes", &stats.inactive_split_bytes},
      {"requested_bytes", &stats.requested_bytes}};
  const char* pools[] = {"all", "small_pool", "large_pool"};  // c10's StatType order
  for (const auto& [name, array] : arrays) {
    for (size_t pool = 0; pool < 3; ++pool) add_stat(std::string(name) + "." + pools[pool], (*array)[pool]);
  }
  add_stat("oversize_allocations", stats.oversize_allocations);
  add_stat("oversize_segments", stats.oversize_segments);
  flat["num_alloc_retries"] = stats.num_alloc_retries;
  flat["num_ooms"] = stats.num_ooms;
  flat["num_sync_all_streams"] = stats.num_sync_all_streams;
  flat["num_device_alloc"] = stats.num_device_alloc;
  flat["num_device_free"] = stats.num_device_free;
  flat["max_split_size"] = stats.max_split_size;
  return flat;
}

// True when something other than eagerc has claimed PrivateUse1: a different backend
// name, hooks, a device guard, or an allocation kernel. Registering over any of them
// would replace half of that backend.
bool claimed_by_other_backend() {
  const std::string name = c10::get_privateuse1_backend(/*lower_case=*/true);
  if (name != "privateuseone" && name != "eagerc") return true;
  if (at::isPrivateUse1HooksRegistered()) return true;
  if (c10::impl::hasDeviceGuardImpl(kDeviceType)) return true;
  auto empty = c10::Dispatcher::singleton().findOp({"aten::empty", "memory_format"});
  return empty.has_value() && empty->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

bool register_device() {
  static bool registered = false;
  if (registered) return true;
  if (claimed_by_other_backend()) return false;
  register_allocator();
  register_guard();
  register_hooks();
  register_ops();
  register_attention_choice();
  register_autocast();
  registered = true;
  return true;
}

}  // namespace

void init_bindings(py::module_& m) {
  m.def("_device_register", &register_device,
        "Register the eagerc device runtime for PrivateUse1 (once); False if another "
        "backend owns PrivateUse1.");
  m.def(
      "_device_default_generator",
      [](int index) {
        return py::reinterpret_steal<py::object>(
            THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(index))));
      },
      py::arg("index") = 0, "The default torch.Generator of eagerc device `index`.");
  m.def("_serve_attention_choice", &serve_attention_choice,
        "scaled_dot_product_attention on a served PrivateUse1 device takes its memory home's "
        "fused-backend choice (the CPU's for host memory) unless the device's runtime "
        "registered one; True when eagerc's choice serves it.");
  m.def("_device_set_backing", [](const std::string& backing) {
    set_backing(c10::Device(backing).type());
  }, py::arg("backing"), "Where the eagerc device's memory lives: \"cpu\" or \"cuda\" (before registering).");
  m.def("_device_count", [] { return static_cast<int>(device_count()); },
        "The eagerc device's indices: 1 on host memory, one per CUDA GPU on GPU memory.");
  m.def("_device_current", [] { return static_cast<int>(current_index()); },
        "The current eagerc device index (CUDA's current device on GPU memory).");
  m.def("_device_set_current", [](int index) { set_current_index(static_cast<c10::DeviceIndex>(index)); },
        py::arg("index"), "Make eagerc device `index` current (raises for an index it does not have).");
  m.def("_device_empty_cache", &empty_cache,
        "Return the device's cached free memory (host blocks to malloc; on GPU memory CUDA's "
        "cache); the host bytes returned.");
  m.def("_device_memory_stats", &memory_stats, py::arg("index"),
        "The device allocator's statistics for device `index`, flat as torch.cuda.memory_stats's.");
  m.def("_device_reset_peak_stats", [](int index) {
    host_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(index));
  }, py::arg("index"), "Reset the peak entries of device `index`'s statistics to their current values.");
  m.def("_device_reset_accumulated_stats", [](int index) {
    host_allocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(index));
  }, py::arg("index"), "Reset the allocated/freed counts and event counters of device `index`'s statistics.");
  m.def("_device_mem_get_info", [](int index) {
    return host_allocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(index));
  }, py::arg("index"), "(free, total) bytes of device `index`'s memory (host memory: the machine's).");
  m.def("_device_cached_bytes", &cached_bytes,
        "Bytes of freed host-memory blocks the device keeps for reuse.");
  m.def("_device_set_cache_limit", &set_cache_limit, py::arg("bytes"),
        "At most this many bytes of freed host memory are kept for reuse (0: none).");
  m.def("_device_runtime_ops", &runtime_op_names,
        "The ATen ops the eagerc device runtime implements by hand.");
}

}  // namespace eagerc::device
