// _eagerc (eagerc._C to users): the Python face of the C++ runtime.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "capture/graph_artifact.h"
#include "device/device_bindings.h"
#include "kernel_holder.h"
#include "miss.h"
#include "host_alias.h"
#include "registration.h"
#include "signature.h"
#include "signature_layout.h"
#include "resolver_bridge.h"

namespace eagerc {
void init_dict_versions_bindings(pybind11::module& m);  // capture/dict_versions.cpp
}

namespace py = pybind11;

namespace {

c10::DispatchKey parse_key(const std::string& name) {
  return c10::parseDispatchKey(name);
}

// _servable_ops' `random`: "native", "compiled" or "in_home_externs" (registration.h).
eagerc::RandomOps parse_random_ops(const std::string& name) {
  if (name == "native") return eagerc::RandomOps::Native;
  if (name == "compiled") return eagerc::RandomOps::Compiled;
  if (name == "in_home_externs") return eagerc::RandomOps::InHomeExterns;
  throw py::value_error("random must be 'native', 'compiled' or 'in_home_externs', got '" + name + "'");
}

py::dict op_stats(const eagerc::OpState& st) {
  py::dict d;
  d["hits"] = st.counters.hits.load();
  d["misses"] = st.counters.misses.load();
  d["fallbacks"] = st.counters.fallbacks.load();
  d["aliased"] = st.counters.aliased.load();
  d["interim"] = st.counters.interim.load();
  d["externs"] = st.counters.externs.load();
  d["host_round_trips"] = st.counters.host_round_trips.load();
  d["kernels"] = st.table.size();
  // Its compiled kernels run on aliases of the memory's home (their wrappers call the
  // home's ATen functions), not on the device's own tensors.
  d["on_home_aliases"] = st.compiled_on_host_aliases.load();
  // Value scalars go into the key (tracing with lifted scalars failed for this op).
  d["specialize_values"] = st.specialize_values.load();
  py::dict reasons;
  for (const auto& kv : st.fallback_reasons()) reasons[py::str(kv.first)] = kv.second;
  d["fallback_reasons"] = reasons;
  return d;
}

}  // namespace

PYBIND11_MODULE(_eagerc, m) {
  m.doc() = "eagerc C++ runtime: kernel holders, signatures, L1 tables, the eagerc device";
  eagerc::init_miss_bindings(m);
  eagerc::device::init_bindings(m);
  eagerc::init_graph_artifact_bindings(m);
  eagerc::init_dict_versions_bindings(m);
  m.def("_servable_ops", [](const std::string& key, bool new_device, const std::string& random,
                            const std::vector<std::string>& deny) {
    return eagerc::servable_ops(parse_key(key), new_device, parse_random_ops(random), deny);
  });
  m.def("_enable_ops", [](const std::string& key, const std::vector<std::string>& ops,
                          bool host_aliases, bool new_device, bool run_on_aliases) {
    return eagerc::enable_ops(parse_key(key), ops,
                              eagerc::ServingOptions{host_aliases, new_device, run_on_aliases});
  }, py::arg("key"), py::arg("ops"), py::kw_only(), py::arg("host_aliases"),
     py::arg("new_device"), py::arg("run_on_aliases") = false);
  m.def("_set_memory_home", [](const std::string& served, const std::string& home) {
    eagerc::set_memory_home(c10::Device(served).type(), c10::Device(home).type());
  }, py::arg("served"), py::arg("home"),
     "Declare that `served`'s memory is addressed by `home`'s kernels (\"cpu\" or \"cuda\").");
  m.def("_aliasable_ops", [](const std::string& key, const std::vector<std::string>& deny) {
    return eagerc::aliasable_ops(parse_key(key), deny);
  });
  m.def("_specialize_scalars", [](const std::vector<std::string>& ops) {
    for (const auto& st : eagerc::all_op_states()) {
      if (std::find(ops.begin(), ops.end(), st->name) != ops.end()) st->specialize_values = true;
    }
  });
  m.def("_disable_key", [](const std::string& key) { eagerc::disable_key(parse_key(key)); });
  m.def("_is_enabled", [](const std::string& key) { return eagerc::is_enabled(parse_key(key)); });
  m.def("_set_resolver", &eagerc::set_resolver);
  m.def("_enter_activity", &eagerc::enter_activity);
  m.def("_exit_activity", &eagerc::exit_activity);
  m.def("_force_size_class", [](const std::string& size_class) {
    if (size_class.size() > 1 || (size_class.size() == 1 && size_class != "S" && size_class != "P"))
      throw std::invalid_argument("size class must be 'S', 'P' or '' (the size rule)");
    eagerc::set_forced_size_class(size_class.empty() ? 0 : size_class[0]);
  });
  m.def("_set_cpu_fallback", &eagerc::set_cpu_fallback);
  m.def("_set_alias_fallback", &eagerc::set_alias_fallback);
  // The ops (on `key`) the target's vendor library serves as externs (Codegen.vendor_externs).
  m.def("_set_vendor_externs", [](const std::string& key, const std::vector<std::string>& ops) {
    const c10::DispatchKey k = parse_key(key);
    for (const auto& st : eagerc::all_op_states()) {
      if (st->dispatch_key == k) {
        st->vendor_extern = std::find(ops.begin(), ops.end(), st->name) != ops.end();
      }
    }
  });
  m.def("_resolver_calls", &eagerc::resolver_calls);
  // torch.compile on the eagerc device compiled for its memory's home
  // (eagerc/device/compile_on_home.py): a graph's inputs as home aliases, its results back.
  m.def("_home_alias", [](const at::Tensor& t) { return eagerc::cpu_alias(t); },
        "A tensor on the memory's home (CPU, or CUDA on GPU memory) over the bytes of `t`.");
  m.def("_device_alias", [](const at::Tensor& t, const std::string& device) {
        return eagerc::alias_on_device(t, c10::Device(device));
      }, "A tensor on `device` over the bytes of `t`, a tensor on that device's memory home.");
  // The signature's layout (csrc/signature_layout.h), read by eagerc/kernel_key.py: its
  // version is in every cache namespace, its parts are named in the key's DEBUG log.
  m.def("_signature_layout", []() {
    py::list parts;
    for (const auto& part : eagerc::kSignatureParts) {
      parts.append(py::make_tuple(part.name, part.bytes, part.why));
    }
    return py::make_tuple(eagerc::kSignatureLayoutVersion, parts);
  }, "(version, [(name, bytes, why), ...]) of a call signature's layout.");
  // Tests: the key the unboxed convolution computes (csrc/unboxed_convolution.h).
  m.def("_convolution_signature_key",
        [](const at::Tensor& input, const at::Tensor& weight, std::optional<at::Tensor> bias,
           std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
           bool transposed, std::vector<int64_t> output_padding, int64_t groups) {
          eagerc::CallSignature sig;
          eagerc::compute_convolution_signature(
              input, weight, bias ? &*bias : nullptr, c10::fromIntArrayRefSlow(stride),
              c10::fromIntArrayRefSlow(padding), c10::fromIntArrayRefSlow(dilation), transposed,
              c10::fromIntArrayRefSlow(output_padding), c10::SymInt(groups), false, &sig);
          return py::bytes(sig.key);
        });
  // Tests: the keys the unboxed mm and addmm compute (csrc/unboxed_mm.h).
  m.def("_mm_signature_key", [](const at::Tensor& self, const at::Tensor& mat2) {
    eagerc::CallSignature sig;
    eagerc::compute_mm_signature(self, mat2, false, &sig);
    return py::bytes(sig.key);
  });
  m.def("_addmm_signature_key", [](const at::Tensor& self, const at::Tensor& mat1,
                                   const at::Tensor& mat2, py::object beta, py::object alpha,
                                   bool specialize_values) {
    // A Python number as the Scalar the dispatcher would pass (pybind has no Scalar caster).
    auto scalar = [](const py::object& v) {
      if (py::isinstance<py::bool_>(v)) return c10::Scalar(v.cast<bool>());
      if (py::isinstance<py::int_>(v)) return c10::Scalar(v.cast<int64_t>());
      return c10::Scalar(v.cast<double>());
    };
    eagerc::CallSignature sig;
    eagerc::compute_addmm_signature(self, mat1, mat2, scalar(beta), scalar(alpha),
                                    specialize_values, &sig);
    return py::bytes(sig.key);
  });
  m.def("_op_stats", []() {
    py::dict out;
    for (const auto& st : eagerc::all_op_states()) {
      out[py::str(st->name + "@" + c10::toString(st->dispatch_key))] = op_stats(*st);
    }
    return out;
  });
  m.def("_reset_op_stats", []() {
    for (const auto& st : eagerc::all_op_states()) {
      st->counters.hits = 0;
      st->counters.misses = 0;
      st->counters.fallbacks = 0;
      st->counters.aliased = 0;
      st->counters.interim = 0;
      st->counters.externs = 0;
      st->counters.host_round_trips = 0;
      st->clear_fallback_reasons();  // reasons are counters too: a reset starts them afresh
    }
  });
  m.def("_clear_tables", []() {
    for (const auto& st : eagerc::all_op_states()) st->table.clear();
  });
}
