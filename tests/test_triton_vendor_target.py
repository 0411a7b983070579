"""A vendor's device whose Inductor backend is Triton: eagerc serves it where its memory is
CUDA memory, which the device says by registering CUDA's device op overrides (its
wrappers' streams, device guards and kernel launches are CUDA's), and refuses any other
launch. What a machine without a GPU can check: which code generator the registration
chooses and what is refused (with CUDA's availability faked where the check is about the
registration, not the GPU). examples/mygpu on a GPU: tests/test_gpu_vendor_example.py."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import torch

from eagerc import codegen, targets

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mygpu"


@pytest.fixture
def triton_backend_for_hpu(monkeypatch):
    """Registers a Triton backend for "hpu" (a device type torch knows, none here) as a
    vendor's CUDA-memory device registers one (CUDA's C++ wrapper and device interface),
    undone after the test; returns a function registering its device op overrides."""
    from torch._dynamo import device_interface
    from torch._inductor.codegen import common
    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    common.init_backend_registration()
    common.register_backend_for_device("hpu", TritonScheduling, PythonWrapperCodegen, CppWrapperGpu)
    device_interface.register_interface_for_device("hpu", device_interface.CudaInterface)
    yield lambda overrides: monkeypatch.setitem(common.device_op_overrides_dict, "hpu", overrides)
    common.device_codegens.pop("hpu", None)
    device_interface.device_interfaces.pop("hpu", None)
    targets._targets.pop("hpu", None)


@pytest.fixture
def cuda_seen(monkeypatch):
    """torch sees a CUDA GPU and Triton (the code generator's availability, not the
    registration, is what a GPU machine adds)."""
    import torch.utils._triton

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)


def test_cuda_device_op_overrides_make_a_triton_backend_a_cuda_memory_target(triton_backend_for_hpu, cuda_seen):
    from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

    triton_backend_for_hpu(CUDADeviceOpOverrides())
    assert codegen.TRITON.refusal_for("hpu") is None
    target = targets.for_device("hpu")
    assert (target.codegen, target.home, target.host_aliases) == (codegen.TRITON, "cuda", True)
    # Its calls are traced on the same index's GPU.
    assert target.home_device(torch.device("hpu", 1)) == torch.device("cuda", 1)


def test_a_triton_backend_launching_otherwise_is_refused_naming_what_it_registered(triton_backend_for_hpu,
                                                                                     cuda_seen):
    from torch._inductor.codegen.common import DeviceOpOverrides

    class OwnDriverOpOverrides(DeviceOpOverrides):
        """A vendor's own streams and kernel launches (not CUDA's)."""

    triton_backend_for_hpu(OwnDriverOpOverrides())
    with pytest.raises(targets.TargetError, match="launches them with OwnDriverOpOverrides") as refused:
        targets.for_device("hpu")
    assert "register_device_op_overrides('hpu', CUDADeviceOpOverrides())" in str(refused.value)
    assert "hpu" not in targets.known_targets()


def test_without_a_gpu_the_triton_backend_is_refused_for_the_gpu_not_the_registration(triton_backend_for_hpu):
    from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    triton_backend_for_hpu(CUDADeviceOpOverrides())
    with pytest.raises(targets.TargetError, match="no CUDA GPU is present"):
        targets.for_device("hpu")


def test_the_gpu_example_registers_a_backend_eagerc_serves_with_triton():
    # examples/mygpu's Inductor backend under its own name, in a fresh interpreter (a process
    # has one PrivateUse1 name): the device is served by the Triton code generator where a GPU
    # is seen, and eagerc's import says why not where none is. On a torch without CUDA the
    # example registers nothing itself (it warns); its backend is registered here by hand.
    script = (
        "import warnings, torch\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import mygpu\n"
        "if torch.version.cuda is None:\n"
        "    assert any('mygpu is not registered' in str(w.message) for w in caught), caught\n"
        "    torch.utils.rename_privateuse1_backend('mygpu')\n"
        "    from mygpu import inductor_backend\n"
        "    inductor_backend.register()\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import eagerc\n"
        "said = [str(w.message) for w in caught if 'does not serve' in str(w.message)]\n"
        "if not torch.cuda.is_available():\n"
        "    assert len(said) == 1 and 'no CUDA GPU is present' in said[0], said\n"
        "    import torch.utils._triton\n"
        "    torch.cuda.is_available = lambda: True\n"
        "    torch.utils._triton.has_triton = lambda: True\n"
        "t = eagerc.targets.for_device('mygpu')\n"
        "print(t.codegen.name, t.home, t.dispatch_key, t.host_aliases, t.new_device)\n")
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "triton cuda PrivateUse1 True True"


def _example_build_module():
    """examples/mygpu/mygpu/_build.py, loaded by its path: importing the package would
    register the device (a process has one PrivateUse1)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mygpu_build_under_test", EXAMPLE / "mygpu" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_example_links_the_cuda_runtime_torch_loaded(tmp_path, monkeypatch):
    # The CUDA runtime's library: the one torch loaded, else as NVIDIA's wheels lay it out
    # (CUDA 13's nvidia/cu13, CUDA 12's nvidia/cuda_runtime), else the toolkit's. No CUDA
    # header is needed (a wheel's cuda_runtime_api.h lacks the crt/ headers it includes).
    build = _example_build_module()
    for wheel in ("cu13", "cuda_runtime"):
        (tmp_path / "site" / "nvidia" / wheel / "lib").mkdir(parents=True)
        (tmp_path / "site" / "nvidia" / wheel / "lib" / "libcudart.so.13").write_text("")
    (tmp_path / "site" / "nvidia" / "cublas" / "lib").mkdir(parents=True)  # no runtime there
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(build, "_toolkit_roots", lambda: [str(tmp_path / "toolkit")])
    loaded = str(tmp_path / "elsewhere" / "libcudart.so.13")
    monkeypatch.setattr(build, "loaded_library", lambda prefix: loaded)
    assert build.cudart() == loaded
    monkeypatch.setattr(build, "loaded_library", lambda prefix: None)
    assert build.cudart() == str(tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    monkeypatch.setattr(sys, "path", [])
    with pytest.raises(RuntimeError, match="no CUDA runtime library"):
        build.cudart()
    (tmp_path / "toolkit" / "lib64").mkdir(parents=True)
    (tmp_path / "toolkit" / "lib64" / "libcudart.so.13").write_text("")
    assert build.cudart() == str(tmp_path / "toolkit" / "lib64" / "libcudart.so.13")


@pytest.mark.slow
def test_the_gpu_example_runtime_compiles_links_and_loads():
    # Wherever the CUDA runtime's library is found (a GPU machine; a toolkit beside a
    # CPU-only torch): g++ against this torch's headers, linked to libcudart, loaded (every
    # symbol resolved) in a fresh interpreter. Nothing of it runs without a GPU.
    build = _example_build_module()
    try:
        build.cudart()
    except RuntimeError as e:
        pytest.skip(str(e))
    script = ("import importlib.util, torch\n"
              f"spec = importlib.util.spec_from_file_location('b', {str(EXAMPLE / 'mygpu' / '_build.py')!r})\n"
              "b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n"
              "print(callable(b.extension().register_runtime))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert done.stdout.splitlines()[-1] == "True"
