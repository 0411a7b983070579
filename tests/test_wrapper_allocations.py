"""How CPU artifacts allocate: memory-only temporaries from a per-thread arena
(eagerc/codegen/cpp/scratch_buffers.py), outputs directly rather than through the dispatcher
(eagerc/compile/direct_alloc.py, csrc/direct_alloc.cpp); and how they check extern kernels'
outputs without building error messages on every call (eagerc/compile/output_asserts.py)."""
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F

import eagerc
from eagerc.compile.direct_alloc import direct_allocations
from eagerc.compile.output_asserts import cheap_output_asserts
from eagerc.codegen.cpp.scratch_buffers import scratch_buffers
from eagerc.testing import assert_close

WRAPPER = """#include <torch/csrc/inductor/cpp_wrapper/cpu.h>
void inductor_entry_impl(AtenTensorHandle* input_handles, AtenTensorHandle* output_handles) {
    const int64_t int_array_0[] = {s50, 1L};
    const int64_t int_array_1[] = {1L, s50};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    AtenTensorHandle buf1_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_complex64, cached_torch_device_type_cpu, 0, &buf1_handle));
    RAIIAtenTensorHandle buf1(buf1_handle);
    AtenTensorHandle buf3_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf3_handle));
    RAIIAtenTensorHandle buf3(buf3_handle);
    cpp_fused_0((float*)(buf0.data_ptr()), (float*)(buf1.data_ptr()), (float*)(buf3.data_ptr()), s50);
    buf0.reset();
    output_handles[0] = buf3.release();
}
"""


def test_only_memory_only_temporaries_become_scratch():
    code = scratch_buffers(WRAPPER)
    assert "eagerc_scratch buf0(2, int_array_0, int_array_1, 4);" in code
    assert "buf0_handle" not in code
    # An output (released to the caller) and a dtype without a known size stay tensors.
    assert "RAIIAtenTensorHandle buf3(buf3_handle);" in code
    assert "RAIIAtenTensorHandle buf1(buf1_handle);" in code
    # The helper comes once, after the header.
    assert code.startswith("#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\n")
    assert code.count("class eagerc_scratch") == 1


def test_a_wrapper_without_such_temporaries_is_unchanged():
    plain = WRAPPER.replace("buf0.reset();", "output_handles[1] = buf0.release();")
    plain = plain.replace("cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf3",
                          "cached_torch_dtype_float32, cached_torch_device_type_cuda, 0, &buf3")
    assert scratch_buffers(plain) == plain


REUSING = """#include <torch/csrc/inductor/cpp_wrapper/cpu.h>
void inductor_entry_impl(AtenTensorHandle* input_handles, AtenTensorHandle* output_handles) {
    AtenTensorHandle buf2_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf2_handle));
    RAIIAtenTensorHandle buf2(buf2_handle);
    AtenTensorHandle buf5_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, 0, &buf5_handle));
    RAIIAtenTensorHandle buf5(buf5_handle);
    cpp_fused_0((float*)(buf2.data_ptr()), (float*)(buf5.data_ptr()), s50);
    auto buf3 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf2, 2, int_array_0, int_array_4, 0L)); buf2.reset();  // reuse
    auto buf6 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf5, 2, int_array_0, int_array_4, 0L)); buf5.reset();  // reuse
    cpp_fused_1((float*)(buf3.data_ptr()), (float*)(buf6.data_ptr()), s50);
    output_handles[0] = buf6.release();
}
"""


def test_a_memory_only_buffer_over_a_freed_ones_memory_is_the_same_scratch():
    code = scratch_buffers(REUSING)
    assert "eagerc_scratch buf2(2, int_array_0, int_array_1, 4);" in code
    assert "eagerc_scratch& buf3 = buf2;" in code
    # buf5's memory becomes an output (buf6 is released): both stay tensors.
    assert "RAIIAtenTensorHandle buf5(buf5_handle);" in code
    assert "auto buf6 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf5," in code
    assert "eagerc_scratch& buf6" not in code


def test_kernels_with_scratch_temporaries_match_eager(fresh_cache):
    # softmax keeps the row max and sum, log_softmax its statistics, in temporaries; rows
    # of several sizes, so the arena is reused for temporaries of other sizes; a large one
    # (past the arena's 64 KiB) gets its own allocation.
    torch.manual_seed(0)
    inputs = [torch.randn(shape) for shape in [(64, 64), (3, 7), (128, 33), (3, 40000)]]
    expected = [(torch.softmax(x, -1), F.log_softmax(x, 0)) for x in inputs]
    with eagerc.enabled("cpu", ops=["aten::_softmax", "aten::_log_softmax"]):
        for _ in range(2):  # the second round hits, on the same arena
            for x, (softmax, log_softmax) in zip(inputs, expected):
                assert_close(torch.softmax(x, -1), softmax)
                assert_close(F.log_softmax(x, 0), log_softmax)
    stats = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert stats["hits"] >= len(inputs) and stats["fallbacks"] == 0, stats


def test_outputs_are_allocated_through_the_loaders_pointer():
    code = direct_allocations(WRAPPER)
    assert "aoti_torch_empty_strided(" not in code.split("aoti_torch_empty_strided;")[1]
    assert code.count("eagerc_empty_strided(2, int_array_0") == 3
    assert 'extern "C" void eagerc_set_allocator(void* fn)' in code
    # The pointer starts as the shim: a loader that does not offer its allocator still works.
    assert "=\n    aoti_torch_empty_strided;" in code


@pytest.mark.parametrize("device", ["cpu", "eagerc"])
def test_directly_allocated_outputs_are_eagers(fresh_cache, device):
    # Outputs with eager's device, dtype and strides (a transposed input keeps its layout
    # through a pointwise op; a reduction's output is contiguous), over fresh memory.
    torch.manual_seed(0)
    x = torch.randn(5, 7).t()
    ops = ["aten::abs", "aten::sum.dim_IntList", "aten::_softmax"]
    with eagerc.enabled("cpu", ops=ops) if device == "cpu" else nullcontext():
        xd = x.to(device)
        results = [torch.abs(xd), torch.sum(xd.to(torch.float64), dim=1), torch.softmax(xd, 0)]
        again = torch.abs(xd)
    expected = [torch.abs(x), torch.sum(x.to(torch.float64), dim=1), torch.softmax(x, 0)]
    for got, want in zip(results, expected):
        assert got.device.type == device and got.dtype == want.dtype
        assert got.stride() == want.stride()
        assert_close(got.cpu(), want)
    assert again.data_ptr() != results[0].data_ptr()
    assert eagerc.stats()["fallbacks"] == 0



def test_extern_outputs_are_checked_by_the_cheap_assert():
    code = WRAPPER.replace("buf0.reset();", 'assert_size_stride(buf3, {s50, 1L}, {1L, s50}, "mm");')
    checked = cheap_output_asserts(code)
    assert 'eagerc_assert_size_stride(buf3, {s50, 1L}, {1L, s50}, "mm");' in checked
    # On a mismatch it still raises through Inductor's own check, with its message.
    assert "torch::aot_inductor::assert_size_stride(t, sizes, strides, op_name);" in checked
    assert cheap_output_asserts(WRAPPER) == WRAPPER


def test_extern_kernels_through_the_cheap_assert_match_eager(fresh_cache):
    # mm, addmm and cumsum are extern calls whose outputs the wrapper checks.
    torch.manual_seed(0)
    a, b, bias = torch.randn(5, 7), torch.randn(7, 3), torch.randn(3)
    with eagerc.enabled("cpu", ops=["aten::mm", "aten::addmm", "aten::cumsum"]):
        got = [torch.mm(a, b), torch.addmm(bias, a, b), torch.cumsum(a, 1), torch.mm(a[:3], b)]
    want = [a @ b, bias + a @ b, torch.cumsum(a, 1), a[:3] @ b]
    for g, w in zip(got, want):
        assert_close(g, w)
    assert eagerc.stats()["fallbacks"] == 0
