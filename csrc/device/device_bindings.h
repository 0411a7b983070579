// Python bindings of the eagerc reference-device runtime, added to eagerc._C.
#pragma once

#include <pybind11/pybind11.h>

namespace eagerc::device {

// Adds to `m`:
//   _device_register() -> bool: registers allocator, guard, hooks and runtime ops for
//       PrivateUse1, once; False (registering nothing) if another backend owns PrivateUse1.
//   _device_default_generator(index: int = 0) -> torch.Generator: the device's default one.
//   _device_runtime_ops() -> list[str]: the hand-written ops ("aten::view", ...), which the
//       compiled-kernel registration must leave alone.
void init_bindings(pybind11::module_& m);

}  // namespace eagerc::device
