// A compiled operator graph of eagerc.capture, called from Python.
//
// Capture compiles a whole recorded graph through the same compile/cache service as one
// ATen op (eagerc/graph_kernels.py): an artifact with eagerc_entry + eagerc_guard, stored
// in kernel_cache. Its runtime inputs are all tensors (lifted floats arrive as 0-dim
// tensors), so the guard arrays are every input's sizes, strides and offset
// (runtime_layout.h, tensor_inputs_layout).
#pragma once
#include <pybind11/pybind11.h>

namespace eagerc {

void init_graph_artifact_bindings(pybind11::module& m);

}  // namespace eagerc
