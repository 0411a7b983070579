// The layout of a call's signature bytes, in one place: every tag the signature writers
// (signature.cpp: the boxed stack and the typed convolution, mm and addmm kernels) put into a
// key, named, with why it is part of the key. Python reads this table and the layout's
// version through eagerc._C._signature_layout(): the version is a component of every cache
// namespace (eagerc/kernel_key.py), and its DEBUG log names these parts.
//
// Change a tag's bytes, or what is written for a call, and bump kSignatureLayoutVersion:
// keys written under the old layout are then in another namespace and are never misread.
#pragma once

#include <cstdint>

namespace eagerc {

constexpr int kSignatureLayoutVersion = 1;

namespace tag {
constexpr char kTensor = 'T';            // dtype, device type, device index, rank follow
constexpr char kUndefinedTensor = 'N';   // an undefined or absent (None) tensor
constexpr char kWrappedNumber = 'W';     // a Python number where the schema says Tensor
constexpr char kContiguous = 'C';        // layout class: contiguous
constexpr char kDense = 'D';             // layout class: stride order, non-overlapping and dense
constexpr char kStrided = 'S';           // layout class: stride order, overlapping or with gaps
constexpr char kAligned = 'A';           // data pointer 16-byte aligned
constexpr char kUnaligned = 'U';
constexpr char kGpuSmall = 's';          // GPU size class of a tensor in GPU memory
constexpr char kGpuMedium = 'm';
constexpr char kGpuLarge = 'l';
constexpr char kTensorList = '[';        // count, then each tensor
constexpr char kBool = 'b';              // a bool, always specialized
constexpr char kInt = 'i';               // a specialized int64
constexpr char kFloat = 'f';             // a specialized double
constexpr char kLiftedInt = 'I';         // an int value scalar passed at run time
constexpr char kLiftedFloat = 'F';       // a float value scalar passed at run time
constexpr char kNone = 'n';              // None where a scalar or value may stand
constexpr char kIntList = 'L';           // count, then int64s
constexpr char kBoolList = 'B';          // count, then one byte each
constexpr char kString = 's';            // bytes, then NUL (a specialized argument, never
                                         // where a GPU size class may stand)
constexpr char kDevice = 'd';            // device type, device index
constexpr char kParallel = 'P';          // last byte: the call's size class on host memory
constexpr char kSerial = 'S';
}  // namespace tag

// One named part of the signature: its bytes and why the key holds it.
struct SignaturePart {
  const char* name;
  const char* bytes;
  const char* why;
};

constexpr SignaturePart kSignatureParts[] = {
    {"tensor", "'T' dtype device_type device_index rank",
     "generated code is specialized on a tensor's dtype, device and rank"},
    {"absent_tensor", "'N'", "an undefined or None tensor changes the graph"},
    {"wrapped_number", "'W' then a scalar",
     "a Python number passed as a Tensor is a scalar to promotion and to the graph"},
    {"size_stride_classes", "one byte per dim: size class | stride class << 2 (0, 1, other)",
     "sizes and strides are symbolic except 0 and 1, which change the code"},
    {"layout_class", "'C', or 'D'/'S' then the stride order of up to 16 dims",
     "which dim is innermost decides the loop order and vectorization"},
    {"alignment", "'A' or 'U'", "vectorized and Triton loads assume 16-byte alignment when it holds"},
    {"gpu_size_class", "'s', 'm' or 'l' after a tensor in GPU memory",
     "a Triton kernel is tuned on its call's sizes at compile time"},
    {"tensor_list", "'[' count then each tensor", "the list's length is the graph's arity"},
    {"specialized_scalar", "'b' byte, 'i' int64 or 'f' double",
     "bools, scalars 0 and 1, and every scalar of an op that compiles with values"},
    {"lifted_scalar", "'I' or 'F'", "a value scalar is a runtime input: only its kind is keyed"},
    {"none", "'n'", "an absent optional scalar or argument changes the graph"},
    {"int_list", "'L' count int64s", "int lists (dims, kernel sizes, strides) shape the computation"},
    {"bool_list", "'B' count bytes", "bool lists (output masks) shape the computation"},
    {"string", "'s' bytes NUL", "string arguments (reduce modes, rounding) select the computation"},
    {"device_argument", "'d' device_type device_index", "a device argument places the outputs"},
    {"parallel_class", "last byte 'P' or 'S'",
     "host kernels of calls at or above ATen's grain size run OpenMP, smaller ones do not"},
};

}  // namespace eagerc
