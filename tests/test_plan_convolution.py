"""Convolution as a launch-plan step (eagerc/codegen/triton/plan_externs.py): Inductor's GPU
wrappers of convolutions (torch 2.11, H100; tests/data/gpu_wrappers/convolution*.cpp) read
into plans, and the plan launcher calling a stand-in convolution
(tests/data/plan_launcher/fake_cuda.c) on CPU."""
import ctypes
import shutil

import pytest
import torch

from eagerc.codegen.triton import launch_plan
from eagerc.codegen.triton.cexpr import Unsupported
from tests.test_launch_plan import _link, _run, _wrapper, launcher  # noqa: F401  (launcher: a fixture)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

_CONVOLUTION_STEP = ("extern aoti_torch_cuda_convolution 10 h:0 h:1 o:- a:ci:1;ci:1 a:ci:1;ci:1 a:ci:1;ci:1 "
                     "b:ci:0 a:ci:0;ci:0 i:ci:1 r:2")


def test_convolution_is_a_plan_step_with_its_int_arrays_and_the_tensor_it_returns():
    """Inductor's GPU wrapper of a 3x3 convolution (torch 2.11, H100): the int arrays are
    literals of the call, the bias an optional handle, the result a new handle."""
    code = _wrapper("convolution")
    plan = launch_plan.plan_of(code)
    assert _CONVOLUTION_STEP in plan and "\nout 0 2\n" in plan and "launch " not in plan
    # The wrapper names the six sizes of its inputs; only the guard reads them (from its own
    # arrays), so the plan does not fetch them at each call.
    assert "int64_t s44 = arg0_1_size[1];" in code and "seti " not in plan
    with_bias = code.replace("arg1_1, nullptr,", "arg1_1, &temporary_reference(arg0_1.get()),")
    assert " h:0 h:1 o:0 a:" in launch_plan.plan_of(with_bias)
    for wrong in (code.replace("{1L, 1L}.cbegin(), 2,", "{1L, 1L}.cbegin(), 3,", 1),  # length and values disagree
                  code.replace("arg1_1, nullptr,", "arg1_1, &some_other_form,"),
                  code.replace("&buf0_handle));", "&buf9_handle));")):
        with pytest.raises(Unsupported):
            launch_plan.plan_of(wrong)


@pytest.mark.parametrize("name", ["convolution_stride2", "convolution_bias"])
def test_a_convolutions_strided_view_and_bias_kernel_are_planned(name):
    """Stride 2 (ResNet-50's downsampling, H100): the result is a view whose sizes are
    floor divisions inside an int array (``c10::div_floor_integer(a, b)``: commas inside
    a value); with a bias, Inductor adds it in a Triton kernel after the convolution."""
    steps = launch_plan.plan_of(_wrapper(name)).splitlines()
    assert sum(s.startswith("extern aoti_torch_cuda_convolution ") for s in steps) == 1
    view = next(s for s in steps if s.startswith("view "))
    assert view.split()[3] == "4" and ",fd" in view  # 4 dimensions, floor divisions
    assert sum(s.startswith("launch ") for s in steps) == (name == "convolution_bias")


@pytest.mark.parametrize("borrowed", [False, True])
def test_the_launcher_calls_convolution_and_returns_the_tensor_it_made(tmp_path, launcher, borrowed):
    lib = _link(tmp_path, launcher, launch_plan.plan_of(_wrapper("convolution")))
    x, w = torch.randn(1, 64, 8, 8), torch.randn(64, 64, 3, 3)
    (out,) = _run(lib, [x, w], 1, 0, borrowed)
    assert out.data_ptr() == x.data_ptr()  # the stand-in's result: a new handle of its input
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_extern"))) == b"convolution"
    handles = list((ctypes.c_void_p * 4).in_dll(lib, "fake_extern_handles"))
    assert handles[0] and handles[1] and handles[2] is None  # no bias: a null optional
    arrays = [list(row) for row in ((ctypes.c_int64 * 4) * 4).in_dll(lib, "fake_conv_arrays")]
    assert list((ctypes.c_int64 * 4).in_dll(lib, "fake_conv_lengths")) == [2, 2, 2, 2]
    assert [row[:2] for row in arrays] == [[1, 1], [1, 1], [1, 1], [0, 0]]  # stride, padding, dilation, output padding
    assert list((ctypes.c_int64 * 2).in_dll(lib, "fake_conv_ints")) == [0, 1]  # transposed, groups
