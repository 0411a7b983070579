#include "graph_artifact.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "artifact.h"
#include "signature.h"

namespace py = pybind11;

namespace eagerc {
namespace {

class GraphArtifact {
 public:
  GraphArtifact(const std::string& variant_id, const std::string& path, size_t num_outputs)
      : artifact_(load_artifact(variant_id, path, num_outputs)) {}

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
    fill(inputs, &sig, /*with_ints=*/false);
    c10::SmallVector<at::Tensor, 4> outs;
    {
      py::gil_scoped_release no_gil;
      outs = artifact_->run(sig);
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
};

}  // namespace

void init_graph_artifact_bindings(py::module& m) {
  py::class_<GraphArtifact>(m, "_GraphArtifact")
      .def(py::init<const std::string&, const std::string&, size_t>())
      .def("guard", &GraphArtifact::guard)
      .def("__call__", &GraphArtifact::run);
}

}  // namespace eagerc
