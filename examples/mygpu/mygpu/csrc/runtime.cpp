// The whole runtime of "mygpu", an example PrivateUse1 device whose memory is CUDA memory
// under an allocator of its own (cudaMalloc/cudaFree, not PyTorch's caching allocator) and
// which has no compute kernel of its own: eagerc compiles every computing op for it as
// Triton kernels. One concept per section: the allocator, the device guard (mygpu:N is
// cuda:N; its streams are CUDA's), the hooks (device count, generators, storage resize),
// and the runtime ops (allocation, copies, scalar reads, storage mutation, the views).
//
// Only five functions of the CUDA runtime's C API are used directly (libcudart, declared
// below); what else concerns CUDA goes through c10's device-generic interfaces (the CUDA
// device guard, CUDA's hooks), so the runtime builds with g++ against torch's headers alone.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/accumulate.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <string>

// The CUDA runtime functions the allocator calls, declared as libcudart exports them (C
// linkage, stable since CUDA 4). Not cuda_runtime_api.h: NVIDIA's wheels ship it without
// the crt/ headers it includes (CUDA 13's nvidia/cu13 lacks crt/host_defines.h), so a
// machine with torch and a GPU but no toolkit could not build against it.
extern "C" {
using cudaError_t = int;  // enum cudaError: 0 is cudaSuccess
cudaError_t cudaMalloc(void** pointer, size_t size);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMemcpy(void* dest, const void* src, size_t count, int kind);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t error);
}
constexpr cudaError_t cudaSuccess = 0;
constexpr int cudaMemcpyDeviceToDevice = 3;  // enum cudaMemcpyKind

namespace mygpu {
namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

void check_cuda(cudaError_t status, const char* what) {
  TORCH_CHECK(status == cudaSuccess, "mygpu: ", what, " failed: ", cudaGetErrorString(status));
}

// CUDA's device guard: mygpu:N's memory, current device, streams and events are cuda:N's.
const c10::impl::DeviceGuardImplInterface* cuda() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

c10::DeviceIndex device_count() noexcept {
  return static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().getNumGPUs());
}

c10::DeviceIndex current_index() {
  return cuda()->getDevice().index();
}

c10::DeviceIndex resolved(c10::DeviceIndex index) {
  return index >= 0 ? index : current_index();
}

void check_index(c10::DeviceIndex index) {
  const c10::DeviceIndex count = device_count();
  TORCH_CHECK(index >= -1 && index < count, "mygpu: device index " + std::to_string(index) +
              " is out of range: there is one device per CUDA GPU, " + std::to_string(count) + " here");
}

c10::Device cuda_device(c10::DeviceIndex index) {
  return {c10::DeviceType::CUDA, resolved(index)};
}

c10::Stream as_cuda(const c10::Stream& s) {
  return c10::Stream(c10::Stream::UNSAFE, cuda_device(s.device_index()), s.id());
}

c10::Stream as_mygpu(const c10::Stream& s) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDevice, s.device_index()), s.id());
}

// -- Allocator: cudaMalloc on the current GPU, tagged with the device --------------------

void free_block(void* data) {
  // cudaFree waits for the work queued on the memory, so no stream needs recording. At
  // process exit the CUDA runtime may be gone already: nothing to report then.
  if (data != nullptr) (void)cudaFree(data);
}

struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    // PyTorch's CUDA state (its allocator, generators, streams) is set up on first use;
    // generated wrappers use it for their scratch memory and streams.
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    const c10::DeviceIndex index = current_index();
    void* data = nullptr;
    if (nbytes > 0) {
      const cudaError_t status = cudaMalloc(&data, nbytes);
      if (status != cudaSuccess) {
        (void)cudaGetLastError();  // clear it: the next call must not see this error
        TORCH_CHECK(false, "mygpu: out of memory allocating ", nbytes, " bytes on device ",
                    static_cast<int>(index), ": ", cudaGetErrorString(status));
      }
    }
    return {data, data, &free_block, c10::Device(kDevice, index)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    check_cuda(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice), "cudaMemcpy");
  }
};

Allocator g_allocator;

// A CUDA tensor over the same bytes (CUDA memory): how the runtime ops below reuse CUDA's
// copy and scalar read. target_device: no pointer lookup (an empty tensor has none).
// The conjugate and negative bits go along: CUDA's copy_ resolves them.
at::Tensor cuda_view(const at::Tensor& t) {
  const c10::Device device(c10::DeviceType::CUDA, t.device().index());
  at::Tensor view = at::for_blob(t.data_ptr(), t.sizes())
                        .strides(t.strides())
                        .options(t.options().device(device))
                        .target_device(device)
                        .make_tensor();
  if (t.is_conj()) view._set_conj(true);
  if (t.is_neg()) view._set_neg(true);
  return view;
}

// -- Device guard: CUDA's, with mygpu as the device type ---------------------------------

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_index(d.index());
    return {kDevice, cuda()->exchangeDevice(cuda_device(d.index())).index()};
  }
  c10::Device getDevice() const override { return {kDevice, current_index()}; }
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    cuda()->setDevice(cuda_device(d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) cuda()->uncheckedSetDevice({c10::DeviceType::CUDA, d.index()});
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  // A mygpu stream is the CUDA stream of the same id and index: kernels (launched on
  // CUDA's current stream), copies and events follow torch's stream calls on either.
  c10::Stream getStream(c10::Device d) const noexcept override {
    return as_mygpu(cuda()->getStream(cuda_device(d.index())));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return as_mygpu(cuda()->getDefaultStream(cuda_device(d.index())));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return as_mygpu(cuda()->getStreamFromGlobalPool(cuda_device(d.index()), high_priority));
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return as_mygpu(cuda()->getNewStream(cuda_device(d.index()), priority));
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return as_mygpu(cuda()->exchangeStream(as_cuda(s)));
  }
  bool queryStream(const c10::Stream& s) const override { return cuda()->queryStream(as_cuda(s)); }
  void synchronizeStream(const c10::Stream& s) const override { cuda()->synchronizeStream(as_cuda(s)); }
  void synchronizeDevice(c10::DeviceIndex index) const override {
    cuda()->synchronizeDevice(resolved(index));
  }
  // Events are CUDA events.
  void record(void** event, const c10::Stream& s, c10::DeviceIndex index,
              const c10::EventFlag flag) const override {
    cuda()->record(event, as_cuda(s), index, flag);
  }
  void block(void* event, const c10::Stream& s) const override { cuda()->block(event, as_cuda(s)); }
  bool queryEvent(void* event) const override { return cuda()->queryEvent(event); }
  void synchronizeEvent(void* event) const override { cuda()->synchronizeEvent(event); }
  void destroyEvent(void* event, c10::DeviceIndex index) const noexcept override {
    cuda()->destroyEvent(event, index);
  }
  double elapsedTime(void* start, void* end, c10::DeviceIndex index) const override {
    return cuda()->elapsedTime(start, end, index);
  }
};

// -- Hooks: what torch asks an accelerator about; CUDA's answers for cuda:N ---------------

struct Hooks final : at::PrivateUse1HooksInterface {
  void init() const override { at::globalContext().lazyInitDevice(c10::DeviceType::CUDA); }
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return at::detail::getCUDAHooks().hasPrimaryContext(index);
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  c10::DeviceIndex getCurrentDevice() const override { return current_index(); }
  void setCurrentDevice(c10::DeviceIndex index) const override {
    check_index(index);
    cuda()->setDevice(cuda_device(index));
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    check_index(index);
    return cuda()->exchangeDevice(cuda_device(index)).index();
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  // Random numbers: cuda:N's generators. Kernels eagerc compiles for the device draw
  // their seeds from them, as Inductor's Triton code does on CUDA.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return at::detail::getCUDAHooks().getDefaultGenerator(resolved(index));
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::detail::getCUDAHooks().getNewGenerator(resolved(index));
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return {kDevice, at::detail::getCUDAHooks().getDeviceFromPtr(data).index()};
  }
  bool isPinnedPtr(const void* data) const override {
    return at::detail::getCUDAHooks().isPinnedPtr(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::detail::getCUDAHooks().getPinnedMemoryAllocator();
  }
  // Storage.resize_ (and resize_/set_ below): new memory on the storage's own GPU, the
  // common prefix copied by CUDA on its current stream.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "mygpu: trying to resize a storage that is not resizable");
    const c10::DeviceGuard guard(impl->device());
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    const int64_t keep = static_cast<int64_t>(std::min(newsize, impl->nbytes()));
    if (keep > 0) {
      const c10::Device device(c10::DeviceType::CUDA, impl->device().index());
      const auto bytes = at::TensorOptions().dtype(at::kByte).device(device);
      auto to = at::for_blob(fresh.get(), {keep}).options(bytes).target_device(device).make_tensor();
      auto from = at::for_blob(impl->mutable_data(), {keep}).options(bytes).target_device(device).make_tensor();
      to.copy_(from);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// -- Runtime ops: allocation, copies, scalar reads, storage mutation, views ---------------

// Allocation happens on the device asked for (a factory's device argument), as CUDA's
// generated factory kernels guard it.
std::optional<c10::Device> checked_options(std::optional<c10::Layout> layout,
                                           std::optional<c10::Device> device) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "mygpu: only strided tensors are supported");
  if (device.has_value()) check_index(device->index());
  return device;
}

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool>, std::optional<c10::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(checked_options(layout, device));
  return at::detail::empty_generic(size, &g_allocator, kKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool>) {
  const c10::OptionalDeviceGuard guard(checked_options(layout, device));
  return at::detail::empty_strided_generic(size, stride, &g_allocator, kKeys,
                                           c10::dtype_or_default(dtype));
}

// Every copy to, from or within the device is CUDA's copy_ on CUDA views (dtype
// conversion, any strides, broadcasting, host transfers, non_blocking), on CUDA's current
// stream, which is the device's.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor src = self.device().type() == kDevice ? cuda_view(self) : self;
  if (dst.device().type() == kDevice) {
    cuda_view(dst).copy_(src, non_blocking);
  } else {
    dst.copy_(src, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(cuda_view(self));
}

// resize_ and set_ grow a storage through the hooks (resizePrivateUse1Bytes).
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
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_allocator, /*resizable=*/true);
  return self.set_(storage, 0, {0}, {});
}

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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  // Views: metadata only; their ATen kernels are per backend, these native ones generic.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
}

// copy_ of a conjugate or negative view reaches _copy_from, whose schema does not mark its
// destination written: the math-bit fallbacks would materialize the view with clone(),
// i.e. copy_ again, without end. CUDA's copy_ on the views (which keep the bits)
// resolves them itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace

void register_runtime() {
  static c10::impl::DeviceGuardImplRegistrar guard(kDevice, new GuardImpl());
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  c10::SetAllocator(kDevice, &g_allocator);
}

}  // namespace mygpu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_runtime", &mygpu::register_runtime,
        "Register the device guard, hooks and allocator of mygpu (once, before use).");
}
