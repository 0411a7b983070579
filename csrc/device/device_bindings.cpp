#include "device/device_bindings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>

#include "device/runtime.h"

namespace py = pybind11;

namespace eagerc::device {
namespace {

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
        "Return the device's cached free host-memory blocks to malloc; the bytes returned.");
  m.def("_device_cached_bytes", &cached_bytes,
        "Bytes of freed host-memory blocks the device keeps for reuse.");
  m.def("_device_set_cache_limit", &set_cache_limit, py::arg("bytes"),
        "At most this many bytes of freed host memory are kept for reuse (0: none).");
  m.def("_device_runtime_ops", &runtime_op_names,
        "The ATen ops the eagerc device runtime implements by hand.");
}

}  // namespace eagerc::device
