// The hand-written ATen kernels of the eagerc device: allocation, copies, scalar reads,
// storage mutation and the view ops whose only kernels are per-backend (CPU, CUDA, ...).
// Every other op is compiled by eagerc, or reaches these through a composite kernel
// (clone, _to_copy, t, transpose, select, slice, expand, alias, _unsafe_view, ...).
// The table in runtime_ops() is the one list of them.
#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/native/Resize.h>
#include <c10/util/accumulate.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>

#include "host_alias.h"
#include "device/runtime.h"

namespace eagerc::device {
namespace {

constexpr c10::DispatchKeySet kKeySet(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                   std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "eagerc: only strided tensors are supported, got layout ", *layout);
  const c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == kDeviceType, "eagerc: cannot allocate on ", d);
  check_index(d.index());
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "eagerc: pin_memory=True only applies to CPU tensors");
}

// The allocator serves the current device: an allocation for eagerc:N makes N current for
// its length, as CUDA's generated allocation kernels guard their device argument.
struct AllocationDevice {
  explicit AllocationDevice(std::optional<c10::Device> device)
      : old(current_index()), now(device && device->has_index() ? device->index() : old) {
    if (now != old) set_current_index(now);
  }
  ~AllocationDevice() {
    if (now != old) set_current_index(old);
  }
  AllocationDevice(const AllocationDevice&) = delete;
  AllocationDevice& operator=(const AllocationDevice&) = delete;
  c10::DeviceIndex old, now;
};

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, device, pin_memory);
  AllocationDevice on(device);
  return at::detail::empty_generic(size, host_allocator(), kKeySet,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, device, pin_memory);
  AllocationDevice on(device);
  return at::detail::empty_strided_generic(size, stride, host_allocator(), kKeySet,
                                           c10::dtype_or_default(dtype));
}

// set_() with no source: an empty tensor over a fresh, empty eagerc storage
// (CPU's kernel would give it a CPU storage).
at::Tensor& set_empty(at::Tensor& self) {
  AllocationDevice on(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, host_allocator(), /*resizable=*/true);
  return self.set_(storage, 0, {0}, {});
}

bool in_host_memory(const at::Tensor& t) {
  return t.is_cpu() || (t.device().type() == kDeviceType && memory_home(t.device()).is_cpu());
}

template <typename T>
void copy_elements(char* out, const char* in, int64_t n, int64_t out_stride, int64_t in_stride) {
  for (int64_t k = 0; k < n; ++k) {
    *reinterpret_cast<T*>(out + k * out_stride) = *reinterpret_cast<const T*>(in + k * in_stride);
  }
}

// A copy between two tensors in host memory with the same dtype and no conj/neg bits (a
// bias copied into addmm's output, .to() between CPU and the device) moves bytes over a
// TensorIterator on the tensors themselves: the iterator broadcasts, orders the loops and
// checks overlaps as CPU's copy_ does. Every other copy runs CPU's copy_ on aliases, which
// costs two aliases (a storage and a tensor each) and a second dispatch per call.
bool copy_bytes_in_host_memory(const at::Tensor& self, const at::Tensor& dst) {
  if (!in_host_memory(self) || !in_host_memory(dst) || self.dtype() != dst.dtype() ||
      self.layout() != c10::kStrided || dst.layout() != c10::kStrided || self.is_quantized() ||
      self.is_conj() || dst.is_conj() || self.is_neg() || dst.is_neg()) {
    return false;
  }
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(self)
                  .resize_outputs(false)
                  .check_all_same_device(false)
                  .build();
  if (iter.numel() == 0) return true;
  const int64_t size = static_cast<int64_t>(dst.element_size());
  iter.for_each([size](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      char* out = data[0] + j * strides[2];
      const char* in = data[1] + j * strides[3];
      if (strides[0] == size && strides[1] == size) {
        std::memmove(out, in, static_cast<size_t>(n0 * size));
      } else if (size == 4) {
        copy_elements<uint32_t>(out, in, n0, strides[0], strides[1]);
      } else if (size == 8) {
        copy_elements<uint64_t>(out, in, n0, strides[0], strides[1]);
      } else if (size == 2) {
        copy_elements<uint16_t>(out, in, n0, strides[0], strides[1]);
      } else if (size == 1) {
        copy_elements<uint8_t>(out, in, n0, strides[0], strides[1]);
      } else {
        for (int64_t k = 0; k < n0; ++k) std::memmove(out + k * strides[0], in + k * strides[1], size);
      }
    }
  });
  return true;
}

// Both copy directions, and eagerc -> eagerc: same-dtype copies in host memory move bytes
// (above); the rest run CPU copy_ on zero-copy aliases: it does dtype conversion, any
// strides on either side, conj/neg bits and overlap checks. A source or destination on a
// third device (e.g. CUDA) is handled by its own copy_.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (copy_bytes_in_host_memory(self, dst)) return dst;
  const at::Tensor src = self.device().type() == kDeviceType ? cpu_alias(self) : self;
  if (dst.device().type() == kDeviceType) {
    cpu_alias(dst).copy_(src, non_blocking);
  } else {
    dst.copy_(src, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, /*non_blocking=*/false);
}

// resize_: ATen's CPU kernel grows a storage with memcpy, which cannot read GPU memory.
// This one grows it through the device's hooks (a host memcpy, or a CUDA copy on GPU
// memory: hooks.cpp), then restrides as CPU does.
const at::Tensor& resize(const at::Tensor& self, at::IntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (impl->numel() > 0) {
    const size_t needed = at::detail::computeStorageNbytesContiguous(
        size, self.dtype().itemsize(), impl->storage_offset());
    if (needed > impl->storage().nbytes()) at::native::resize_bytes_nocuda(impl->storage(), needed);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

// set_(storage, offset, size, stride): ATen's CPU kernel grows a too-small storage with
// memcpy (unreadable GPU memory); it is grown through the device's hooks first, as resize_.
at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  if (!stride.empty() || c10::multiply_integers(size) > 0) {
    const size_t itemsize = self.dtype().itemsize();
    const size_t needed = stride.empty()
        ? at::detail::computeStorageNbytesContiguous(size, itemsize, offset)
        : at::detail::computeStorageNbytes(size, stride, itemsize, offset);
    if (needed > source.nbytes()) at::native::resize_bytes_nocuda(source, needed);
  }
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

// record_stream: the allocator keeps the block from reuse until the work queued on `stream`
// is done (CUDA's caching allocator on GPU memory; nothing to wait for on host memory).
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kDeviceType, "eagerc: record_stream expects a stream of ",
              kDeviceType, ", got one of ", stream.device_type());
  host_allocator()->recordStream(self.storage().data_ptr(), stream);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(cpu_alias(self));
}

struct RuntimeOp {
  const char* name;
  torch::CppFunction kernel;
};

template <class Fn>
void add(std::vector<RuntimeOp>& ops, const char* name, Fn fn) {
  ops.push_back(RuntimeOp{name, torch::CppFunction(fn)});
}

// The runtime ops, and why each is hand-written rather than compiled. Views are kept
// here because their only ATen kernels are per backend; the at::native ones used below
// build the view from self's storage and key set, so any device may share them.
std::vector<RuntimeOp> runtime_ops() {
  std::vector<RuntimeOp> ops;
  // Allocation: what memory is, is the runtime's job.
  add(ops, "empty.memory_format", TORCH_FN(empty_memory_format));
  add(ops, "empty_strided", TORCH_FN(empty_strided));
  // Copies between devices: copy_ on a non-native device re-dispatches to _copy_from.
  add(ops, "_copy_from", TORCH_FN(copy_from));
  add(ops, "_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  // Reading a value back to the host (.item(), bool(t), printing).
  add(ops, "_local_scalar_dense", TORCH_FN(local_scalar_dense));
  // The allocator's view of streams: a block stays reserved for work queued on another stream.
  add(ops, "record_stream", TORCH_FN(record_stream));
  // Storage mutation: reallocates or rebinds storage, no data computation.
  add(ops, "resize_", TORCH_FN(resize));
  add(ops, "set_", TORCH_FN(set_empty));
  add(ops, "set_.source_Storage", TORCH_FN(at::native::set_));
  add(ops, "set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  add(ops, "set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  // Views (metadata only, share storage with their base; no composite kernel exists).
  add(ops, "as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  add(ops, "view", TORCH_FN(at::native::view));
  add(ops, "_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  add(ops, "unfold", TORCH_FN(at::native::unfold));
  add(ops, "view_as_real", TORCH_FN(at::native::view_as_real));
  add(ops, "view_as_complex", TORCH_FN(at::native::view_as_complex));
  return ops;
}

}  // namespace

std::vector<std::string> runtime_op_names() {
  std::vector<std::string> names;
  for (const auto& op : runtime_ops()) names.emplace_back(std::string("aten::") + op.name);
  return names;
}

void register_ops() {
  // Called once (device_bindings.cpp). Created here, not by a static TORCH_LIBRARY_IMPL, so
  // that importing eagerc registers nothing when another backend owns PrivateUse1. Never
  // destroyed: destroying a Library removes its kernels.
  auto* library = new torch::Library(torch::Library::IMPL, "aten",
                                     c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (auto& op : runtime_ops()) library->impl(op.name, std::move(op.kernel));

  // copy_ of a conj/neg view re-dispatches to _copy_from, whose schema does not mark dst
  // as written, so the Conjugate/Negative fallbacks would materialize the view with
  // clone(), i.e. copy_, i.e. _copy_from again: endless recursion. CPU and CUDA never
  // reach _copy_from; eagerc's kernel resolves the bits itself (its CPU aliases carry
  // them), so let these two ops fall through to the device kernel.
  for (auto key : {c10::DispatchKey::Conjugate, c10::DispatchKey::Negative}) {
    auto* math_bits = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    for (const char* name : {"_copy_from", "_copy_from_and_resize"}) {
      const auto op = c10::Dispatcher::singleton().findOp({std::string("aten::") + name, ""});
      if (op.has_value() && op->hasKernelForDispatchKey(key)) continue;
      math_bits->impl(name, torch::CppFunction::makeFallthrough());
    }
  }
}

}  // namespace eagerc::device
