#include "graph_artifact.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "artifact.h"
#include "host_alias.h"
#include "signature.h"

namespace py = pybind11;

namespace eagerc {
namespace {

class GraphArtifact {
 public:
  // host_aliases: the graph was compiled for the device's memory home (CPU: from CPU
  // stand-ins of a host-memory device's tensors; CUDA for GPU memory); it runs on
  // zero-copy aliases of them and its outputs are handed back as tensors of that device.
  GraphArtifact(const Artifact* artifact, bool host_aliases)
      : artifact_(artifact), host_aliases_(host_aliases) {
    TORCH_CHECK(artifact_ != nullptr, "eagerc: a graph artifact needs a loaded kernel");
  }

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
    c10::Device device(c10::kCPU);
    if (host_aliases_) {
      aliases.reserve(sig.inputs.size());  // no reallocation: inputs point into it
      for (RuntimeInput& in : sig.inputs) {
        if (has_other_home(in.tensor->device())) {
          device = in.tensor->device();
          aliases.push_back(cpu_alias(*in.tensor));
          in.tensor = &aliases.back();
        }
      }
    }
    c10::SmallVector<at::Tensor, 4> outs;
    {
      py::gil_scoped_release no_gil;
      outs = artifact_->run(sig);
      if (!device.is_cpu()) {
        for (at::Tensor& t : outs) {
          if (t.defined() && t.device() == memory_home(device)) t = result_on_device(std::move(t), device);
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
      if (with_ints) append_tensor_guard_values(t, &sig->ints);
    }
    sig->floats.push_back(0.0);  // the guard takes a pointer; graphs have no float slots
  }

  const Artifact* artifact_;
  bool host_aliases_;
};

}  // namespace

void init_graph_artifact_bindings(py::module& m) {
  py::class_<GraphArtifact>(m, "_GraphArtifact")
      .def(py::init<const Artifact*, bool>(), py::arg("artifact"), py::arg("host_aliases"),
           py::keep_alive<1, 2>())
      .def("guard", &GraphArtifact::guard)
      .def("__call__", &GraphArtifact::run);
}

}  // namespace eagerc
