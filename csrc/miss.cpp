#include "miss.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace eagerc {

bool MissRequest::admits(const Artifact& artifact) const {
  CallSignature sig;
  sig.ints.assign(ints.begin(), ints.end());
  sig.floats.assign(floats.begin(), floats.end());
  return artifact.guard(sig);
}

void init_miss_bindings(py::module& m) {
  py::class_<Artifact, std::unique_ptr<Artifact, py::nodelete>>(
      m, "Artifact", "A loaded compiled kernel (lives as long as the process).")
      .def_property_readonly("variant_id", &Artifact::variant_id)
      .def_property_readonly("path", &Artifact::path)
      .def_property_readonly("num_outputs", &Artifact::num_outputs)
      .def_property_readonly("shares_launcher", &Artifact::shares_launcher);
  m.def("_load_artifact", &load_artifact, py::return_value_policy::reference,
        py::arg("variant_id"), py::arg("path"), py::arg("num_outputs"),
        py::arg("pinned") = std::vector<Artifact::Pinned>{},
        "dlopen a compiled kernel (once per path); raises if it cannot be loaded. `pinned`: "
        "(index, value) terms of its guard, checked before its library is called.");

  py::class_<RuntimeSlot>(m, "RuntimeSlot",
                          "One runtime input of a compiled kernel and its guard slots.")
      .def_property_readonly("kind", [](const RuntimeSlot& s) {
        switch (s.kind) {
          case SlotKind::Tensor: return "tensor";
          case SlotKind::Int: return "int";
          case SlotKind::Float: return "float";
        }
        return "?";
      })
      .def_readonly("arg", &RuntimeSlot::arg)
      .def_property_readonly("item", [](const RuntimeSlot& s) -> py::object {
        if (s.item < 0) return py::none();
        return py::int_(s.item);
      })
      .def_readonly("dim", &RuntimeSlot::dim)
      .def_property_readonly("size_slots", [](const RuntimeSlot& s) {
        std::vector<int64_t> out;
        for (int64_t d = 0; d < s.dim; ++d) out.push_back(s.size_slot(d));
        return out;
      })
      .def_property_readonly("stride_slots", [](const RuntimeSlot& s) {
        std::vector<int64_t> out;
        for (int64_t d = 0; d < s.dim; ++d) out.push_back(s.stride_slot(d));
        return out;
      })
      .def_property_readonly("offset_slot", &RuntimeSlot::offset_slot)
      .def_property_readonly("value_slot", [](const RuntimeSlot& s) { return s.first; },
                             "int and float scalars: their index in ints[] / floats[]")
      .def_property_readonly("int_slots", &RuntimeSlot::int_slots)
      .def("__repr__", [](const RuntimeSlot& s) {
        return "RuntimeSlot(arg=" + std::to_string(s.arg) + ", item=" + std::to_string(s.item) +
               ", kind=" + std::to_string(static_cast<int>(s.kind)) + ")";
      });
  m.def("_tensor_inputs_layout", &tensor_inputs_layout, py::arg("ranks"),
        "The runtime layout of a graph whose inputs are tensors of these ranks.");

  py::class_<MissRequest>(m, "MissRequest", "What the kernel holder asks on an L1 miss.")
      .def_readonly("op_name", &MissRequest::op_name)
      .def_readonly("dispatch_key", &MissRequest::dispatch_key)
      .def_property_readonly("key", [](const MissRequest& r) { return py::bytes(r.key); })
      .def_readonly("args", &MissRequest::args)
      .def_readonly("layout", &MissRequest::layout)
      .def_readonly("parallel", &MissRequest::parallel)
      .def_readonly("specialize_values", &MissRequest::specialize_values)
      .def_readonly("known_variants", &MissRequest::known_variants)
      .def_property_readonly(
          "with_values", [](const MissRequest& r) { return r.with_values.get(); },
          py::return_value_policy::reference_internal,
          "The same call keyed with its scalar values, or None (no lifted scalars, or the op "
          "is keyed by values already).")
      .def("admits", [](const MissRequest& r, const Artifact* a) { return a && r.admits(*a); },
           py::arg("kernel"), "Whether the kernel's guard passes for this call.");

  py::class_<MissAnswer>(m, "MissAnswer", "The resolver's one answer to a MissRequest.")
      .def_static("kernel", [](const Artifact* a, std::vector<const Artifact*> passed_over) {
        TORCH_CHECK(a != nullptr, "MissAnswer.kernel needs an artifact");
        MissAnswer answer{MissAction::Kernel, a, "", true};
        answer.passed_over = std::move(passed_over);
        return answer;
      }, py::arg("artifact"), py::arg("passed_over") = std::vector<const Artifact*>{},
         "Run `artifact`; `passed_over`: stored variants whose guards refused the call (L1 "
         "keeps them too).")
      .def_static("run_on_host_aliases", []() { return MissAnswer{MissAction::RunOnHostAliases}; })
      .def_static("interim", [](std::vector<const Artifact*> passed_over) {
        MissAnswer answer{MissAction::Interim};
        answer.passed_over = std::move(passed_over);
        return answer;
      }, py::arg("passed_over") = std::vector<const Artifact*>{},
         "An existing kernel serves the call while the compile service compiles it; "
         "`passed_over`: stored variants whose guards refused the call (L1 keeps them).")
      .def_static("fallback", [](std::string reason, bool remember) {
        return MissAnswer{MissAction::Fallback, nullptr, std::move(reason), remember};
      }, py::arg("reason"), py::arg("remember") = true)
      .def_static("raise_error", [](std::string kind, std::string message) {
        MissAnswer answer{MissAction::Raise, nullptr, std::move(message), false};
        answer.error_kind = std::move(kind);
        return answer;
      }, py::arg("kind"), py::arg("message"),
         "Raise this error for the call, as eager does (RuntimeError, IndexError, ValueError, "
         "TypeError, NotImplementedError, LinAlgError); nothing is remembered.")
      .def("with_scalar_values", [](const MissAnswer& a) {
        MissAnswer answer = a;
        answer.specialized = true;
        return answer;
      }, "This answer, for the request's `with_values` signature (the op is keyed by scalar "
         "values from now on).")
      .def_property_readonly("action", [](const MissAnswer& a) {
        switch (a.action) {
          case MissAction::Kernel: return "kernel";
          case MissAction::RunOnHostAliases: return "run_on_host_aliases";
          case MissAction::Fallback: return "fallback";
          case MissAction::Raise: return "raise_error";
          case MissAction::Interim: return "interim";
        }
        return "?";
      })
      .def_readonly("reason", &MissAnswer::reason)
      .def_readonly("remember", &MissAnswer::remember)
      .def_readonly("error_kind", &MissAnswer::error_kind)
      .def_readonly("specialized", &MissAnswer::specialized)
      .def_property_readonly("passed_over", [](const MissAnswer& a) { return a.passed_over.size(); },
                             "How many stored variants that refused the call come with it.");
}

}  // namespace eagerc
