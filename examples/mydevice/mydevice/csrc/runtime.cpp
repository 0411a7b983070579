// The whole runtime of "mydevice", an example PrivateUse1 device that keeps its memory in
// host memory and has no compute kernel of its own: eagerc compiles every computing op for
// it. What a device must hand-write is here, one concept per section: the allocator, the
// device guard, the hooks (device count, generator, storage resize), and the runtime ops
// (allocation, copies, scalar reads, storage mutation, the per-backend views).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
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
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/accumulate.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

namespace mydevice {
namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);
// Inductor's C++ kernels assume buffers aligned as CPU's allocator aligns them.
constexpr size_t kAlignment = 64;

// -- Allocator: 64-byte-aligned host memory, tagged with the device ----------------------

void free_block(void* data) { std::free(data); }

struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nullptr;
    if (nbytes > 0) {
      data = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
      TORCH_CHECK(data != nullptr, "mydevice: out of memory allocating ", nbytes, " bytes");
    }
    return {data, data, &free_block, c10::Device(kDevice, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    std::memcpy(dest, src, count);
  }
};

Allocator g_allocator;

// A CPU tensor over the same bytes (host memory): how the runtime ops below reuse CPU code.
at::Tensor host_view(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(c10::kCPU));
}

// -- Device guard: one device, index 0, one stream; kernels finish when they return ------

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index <= 0, "mydevice: device index ", static_cast<int>(index),
              " is out of range: there is one device, index 0");
}

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_index(d.index());
    return {kDevice, 0};
  }
  c10::Device getDevice() const override { return {kDevice, 0}; }
  void setDevice(c10::Device d) const override { check_index(d.index()); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDevice, 0));
  }
  c10::Stream exchangeStream(c10::Stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDevice, 0));
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(c10::DeviceIndex) const override {}
};

// -- Hooks: what torch asks an accelerator about -----------------------------------------

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex index) const override { check_index(index); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    check_index(index);
    return 0;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  // Random numbers: a CPU (mt19937) generator. Kernels eagerc compiles draw their seeds
  // from the CPU's default generator, as Inductor's CPU code does.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    check_index(index);
    static const at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
    return generator;
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::make_generator<at::CPUGeneratorImpl>();
  }
  at::Device getDeviceFromPtr(void*) const override { return {kDevice, 0}; }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "mydevice: trying to resize a storage that is not resizable");
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    if (fresh.get() != nullptr && impl->data() != nullptr) {
      std::memcpy(fresh.get(), impl->data(), std::min(newsize, impl->nbytes()));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// -- Runtime ops: allocation, copies, scalar reads, storage mutation, views ---------------

void check_options(std::optional<c10::Layout> layout, std::optional<c10::Device> device) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "mydevice: only strided tensors are supported");
  check_index(c10::device_or_default(device).index());
}

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool>, std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, device);
  return at::detail::empty_generic(size, &g_allocator, kKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool>) {
  check_options(layout, device);
  return at::detail::empty_strided_generic(size, stride, &g_allocator, kKeys,
                                           c10::dtype_or_default(dtype));
}

// Every copy to, from or within the device is CPU's copy_ on host views (dtype conversion,
// any strides, broadcasting, overlap checks).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor src = self.device().type() == kDevice ? host_view(self) : self;
  if (dst.device().type() == kDevice) {
    host_view(dst).copy_(src, non_blocking);
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
  return at::_local_scalar_dense(host_view(self));
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
// i.e. copy_ again, without end. CPU's copy_ on the host views resolves the bits itself.
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

}  // namespace mydevice

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_runtime", &mydevice::register_runtime,
        "Register the device guard, hooks and allocator of mydevice (once, before use).");
}
