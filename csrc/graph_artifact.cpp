#include "graph_artifact.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "artifact.h"
#include "device/alias.h"
#include "signature.h"

namespace py = pybind11;

namespace eagerc {
namespace {

class GraphArtifact {
 public:
  // on_device: the graph was compiled for the CPU target from CPU stand-ins of eagerc
  // tensors; it runs on zero-copy CPU aliases of them and its outputs are handed back as
  // eagerc tensors (eagerc memory is host memory).
  GraphArtifact(const std::string& variant_id, const std::string& path, size_t num_outputs,
                bool on_device)
      : artifact_(load_artifact(variant_id, path, num_outputs)), on_device_(on_device) {}

  // True when the graph was compiled for these inputs' sizes and strides (the symbolic
  // shape assumptions, as C++; a static graph checks every size and stride).
  bool guard(const py::tuple& inputs) const {
    CallSignature sig;
    fill(inputs, &sig, /*with_ints=*/true);
    return artifact_->guard(sig);
  }

  // Runs the graph; the caller has checked the guard. The GIL is released: the compiled
  // code never calls back into Python (the compiler refuses such graphs).
  py::list run(const py::args& inputs) const {
    CallSignature sig;
    c10::SmallVector<at::Tensor, 16> aliases;
    fill(inputs, &sig, /*with_ints=*/false);
    if (on_device_) {
      aliases.reserve(sig.inputs.size());  // no reallocation: inputs point into it
      for (RuntimeInput& in : sig.inputs) {
        if (in.tensor->device().type() == c10::DeviceType::PrivateUse1) {
          aliases.push_back(device::cpu_alias(*in.tensor));
          in.tensor = &aliases.back();
        }
      }
    }
    c10::SmallVector<at::Tensor, 4> outs;
    {
      py::gil_scoped_release no_gil;
      outs = artifact_->run(sig);
      if (on_device_) {
        for (at::Tensor& t : outs) {
          if (t.defined() && t.device().is_cpu()) t = device::device_alias_of_cpu(t);
        }
      }
    }
    py::list result(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      result[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(outs[i])));
    }
    return result;
  }

 private:
  static void fill(const py::tuple& inputs, CallSignature* sig, bool with_ints) {
    sig->inputs.reserve(inputs.size());
    for (const py::handle& h : inputs) {
      TORCH_CHECK(THPVariable_Check(h.ptr()), "eagerc.capture: a compiled graph takes tensors, got ",
                  Py_TYPE(h.ptr())->tp_name);
      const at::Tensor& t = THPVariable_Unpack(h.ptr());
      RuntimeInput in;
      in.tensor = &t;  // borrowed: `inputs` keeps the Python objects alive for the call
      sig->inputs.push_back(in);
      if (with_ints) {
        for (int64_t s : t.sizes()) sig->ints.push_back(s);
        for (int64_t s : t.strides()) sig->ints.push_back(s);
        sig->ints.push_back(t.storage_offset());
      }
    }
    sig->floats.push_back(0.0);  // the guard takes a pointer; graphs have no float slots
  }

  const Artifact* artifact_;
  bool on_device_;
};

}  // namespace

void init_graph_artifact_bindings(py::module& m) {
  py::class_<GraphArtifact>(m, "_GraphArtifact")
      .def(py::init<const std::string&, const std::string&, size_t, bool>())
      .def("guard", &GraphArtifact::guard)
      .def("__call__", &GraphArtifact::run);
}

}  // namespace eagerc
