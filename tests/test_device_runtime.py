"""The eagerc reference device's hand-written runtime: memory, copies, views, RNG.

Only runtime ops are used on eagerc tensors here (allocation, .to/.cpu/copy_, views,
set_/resize_, .item()); values are compared on the CPU. Compute ops on eagerc belong to
the compiled-kernel tests.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc
import eagerc.device

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


@pytest.fixture(scope="module", autouse=True)
def registered():
    assert eagerc.device.register(), "PrivateUse1 belongs to another backend in this process"


def sample(shape, dtype):
    """Distinct, exactly representable CPU values of `dtype`."""
    n = 1
    for s in shape:
        n *= s
    values = torch.arange(n, dtype=torch.float64).reshape(shape)
    if dtype == torch.bool:
        return values.remainder(3) == 0
    if dtype.is_complex:
        return torch.complex(values, -values).to(dtype)
    return values.remainder(100).to(dtype)


def same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_register_is_idempotent_and_names_the_device():
    assert eagerc.device.register() is True
    assert torch._C._get_privateuse1_backend_name() == "eagerc"
    assert torch.eagerc.device_count() == 1
    assert torch.device("eagerc").type == "eagerc"


@pytest.mark.parametrize("env, gpu, registers", [
    ({}, False, True), ({}, True, False),                      # a GPU keeps torch's accelerator
    ({"EAGERC_BACKING": "cuda"}, True, True),                   # the device on GPU memory
    ({"EAGERC_DEVICE": "1"}, True, True), ({"EAGERC_DEVICE": "0"}, False, False),
])
def test_import_registers_the_device_unless_a_gpu_would_lose_autograd(monkeypatch, env, gpu,
                                                                       registers):
    from eagerc import _config

    for name in ("EAGERC_BACKING", "EAGERC_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert _config.register_device_at_import() is registers


@pytest.mark.slow
def test_import_without_the_device_leaves_privateuse1_and_the_accelerator_alone():
    script = textwrap.dedent("""
        import torch, eagerc
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        assert torch.accelerator.current_accelerator() is None
        with eagerc.enabled("cpu", ops=["aten::abs"]):
            assert torch.abs(torch.tensor([-2.0])).item() == 2.0
        print("OK")
    """)
    env = {**os.environ, "EAGERC_DEVICE": "0"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]


def test_every_runtime_op_has_an_eagerc_kernel():
    from eagerc import _C

    ops = _C._device_runtime_ops()
    for required in ("aten::empty.memory_format", "aten::empty_strided", "aten::_copy_from",
                     "aten::_local_scalar_dense", "aten::view", "aten::as_strided"):
        assert required in ops
    for op in ops:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), op


def test_empty_and_empty_strided():
    x = torch.empty(2, 3, dtype=torch.float16, device="eagerc")
    assert (x.device.type, x.shape, x.dtype) == ("eagerc", (2, 3), torch.float16)
    y = torch.empty_strided((2, 3), (1, 2), device="eagerc")
    assert y.stride() == (1, 2) and y.device == torch.device("eagerc:0")


def test_data_ptr_is_64_byte_aligned():
    for nbytes in (1, 3, 63, 64, 65, 1000, 4097):
        x = torch.empty(nbytes, dtype=torch.uint8, device="eagerc")
        assert x.data_ptr() % 64 == 0, nbytes


def test_only_device_index_0_exists():
    with pytest.raises(RuntimeError, match="exactly one device"):
        torch.empty(2, device="eagerc:1")
    with pytest.raises(ValueError, match="exactly one device"):
        torch.eagerc.set_device(1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip(dtype):
    a = sample((5, 7), dtype)
    y = a.to("eagerc")
    assert y.device.type == "eagerc" and y.dtype == dtype
    assert torch.equal(y.cpu(), a)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bfloat16], ids=str)
def test_copies_convert_dtype(dtype):
    a = sample((4, 6), torch.float32)
    assert torch.equal(a.to("eagerc", dtype).cpu(), a.to(dtype))  # cpu -> eagerc
    y = a.to("eagerc")
    assert torch.equal(y.to(dtype).cpu(), a.to(dtype))  # eagerc -> eagerc
    out = torch.empty(4, 6, dtype=dtype)
    out.copy_(y)  # eagerc -> cpu
    assert torch.equal(out, a.to(dtype))


def test_non_contiguous_source_and_destination():
    a = sample((6, 8), torch.float32)
    y = a.to("eagerc")
    assert torch.equal(a[:, ::2].to("eagerc").cpu(), a[:, ::2])  # strided cpu source
    assert torch.equal(y[1::2, ::3].cpu(), a[1::2, ::3])  # strided eagerc source
    dst = torch.empty(8, 6, device="eagerc")
    dst.t().copy_(a)  # strided eagerc destination, cpu source
    assert torch.equal(dst.cpu(), a.t())
    dst2 = torch.empty(8, 6, device="eagerc")
    dst2.copy_(y.t())  # eagerc -> eagerc, strided source
    assert torch.equal(dst2.cpu(), a.t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int16, torch.bool,
                                   torch.complex128])
def test_same_dtype_copies_broadcast_and_check_overlap_as_cpu(dtype):
    # Same-dtype copies in host memory move bytes over a TensorIterator (csrc/device/ops.cpp)
    a = sample((5, 7), dtype)
    row = a[0]
    for src_dev in ("cpu", "eagerc"):
        dst = torch.empty(5, 7, dtype=dtype, device="eagerc")
        dst.copy_(row.to(src_dev))  # broadcast, as addmm copies its bias
        assert torch.equal(dst.cpu(), row.expand(5, 7))
        dst.t().copy_(a.t().to(src_dev).contiguous())  # permuted destination
        assert torch.equal(dst.cpu(), a)
    back = torch.empty(7, 5, dtype=dtype)
    back.copy_(a.to("eagerc").t())  # to CPU, strided source
    assert torch.equal(back, a.t())
    y = a.to("eagerc")
    y.copy_(y)  # the same memory: a no-op
    assert torch.equal(y.cpu(), a)
    messages = []
    for d in ("cpu", "eagerc"):
        x = a.flatten().to(d)
        with pytest.raises(RuntimeError) as raised:
            x[1:].copy_(x[:-1])  # partial overlap
        messages.append(str(raised.value))
    assert messages[0] == messages[1]  # CPU's error on the device too


def test_tensor_and_module_methods():
    a = sample((3,), torch.float32)
    assert a.eagerc().is_eagerc and not a.is_eagerc
    linear = torch.nn.Linear(2, 3)
    weight = linear.weight.detach().clone()
    linear.eagerc()
    assert linear.weight.device.type == "eagerc"
    assert torch.equal(linear.weight.detach().cpu(), weight)
    storage = torch.UntypedStorage(8).eagerc()
    assert storage.is_eagerc and storage.size() == 8


VIEWS = {
    "slice": lambda t: t[1:],
    "t": lambda t: t.t(),
    "view": lambda t: t.view(4, 6),
    "reshape": lambda t: t.reshape(2, 12),
    "select": lambda t: t[2],
    "expand": lambda t: t[:1].expand(5, 6),
    "permute": lambda t: t.unsqueeze(0).permute(2, 0, 1),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 3, 2),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 6), 1),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "unbind": lambda t: t.unbind(1)[3],
    "flatten": lambda t: t.flatten(),
    "view_dtype": lambda t: t.view(torch.int32),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_storage_with_their_base(name):
    a = sample((4, 6), torch.float32)
    y = a.to("eagerc")
    v = VIEWS[name](y)
    assert v.device.type == "eagerc" and same_storage(v, y)
    assert torch.equal(v.cpu(), VIEWS[name](a))


def test_writes_through_a_view_reach_the_base():
    y = torch.zeros(4, 6).to("eagerc")
    y[1:].copy_(torch.ones(3, 6))
    y.t()[0].copy_(torch.full((4,), 7.0))
    expected = torch.zeros(4, 6)
    expected[1:] = 1
    expected[:, 0] = 7
    assert torch.equal(y.cpu(), expected)


def test_complex_views_and_conj_copies():
    c = sample((3,), torch.complex64)
    y = c.to("eagerc")
    assert torch.equal(torch.view_as_real(y).cpu(), torch.view_as_real(c))
    assert torch.equal(torch.view_as_complex(torch.view_as_real(y)).cpu(), c)
    assert torch.equal(y.conj().cpu(), c.conj())  # conj bit resolved by the copy
    dst = torch.zeros(3, dtype=torch.complex64).to("eagerc")
    dst.conj().copy_(c)
    assert torch.equal(dst.cpu(), c.conj())
    f = sample((4,), torch.float32)
    assert torch.equal(torch._neg_view(f.to("eagerc")).cpu(), -f)


def test_resize_keeps_leading_values():
    a = sample((12,), torch.float32)
    y = a.to("eagerc")
    y.resize_(4, 4)
    assert y.shape == (4, 4) and torch.equal(y.cpu().flatten()[:12], a)
    y.resize_(2)
    assert torch.equal(y.cpu(), a[:2])
    s = a.to("eagerc").untyped_storage()
    s.resize_(100)
    assert s.size() == 100 and s.device.type == "eagerc"


def test_set_variants():
    a = sample((12,), torch.float32)
    y = a.to("eagerc")
    x = torch.empty(0, device="eagerc")
    x.set_(y)
    assert same_storage(x, y) and torch.equal(x.cpu(), a)
    x.set_(y.untyped_storage(), 2, (2, 2), (1, 2))
    assert torch.equal(x.cpu(), a.as_strided((2, 2), (1, 2), 2))
    x.set_(y.untyped_storage())
    assert x.shape == (12,) and same_storage(x, y)
    x.set_()
    assert x.numel() == 0 and x.untyped_storage().device.type == "eagerc"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item(dtype):
    a = sample((2, 3), dtype)
    assert a.to("eagerc")[1, 2].item() == a[1, 2].item()


def test_zero_size_tensors():
    e = torch.empty(0, 3, device="eagerc")
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    assert torch.equal(torch.tensor([]).to("eagerc").cpu(), torch.tensor([]))
    assert e.t().shape == (3, 0) and e.view(3, 0).device.type == "eagerc"


def test_device_module():
    torch.ones(1, device="eagerc")  # available from the program's first tensor on the device
    assert torch.eagerc.is_available() and torch.eagerc.current_device() == 0
    assert torch.eagerc.synchronize() is None
    torch.eagerc.set_device(0)


def test_rng_state_round_trip_and_seeding():
    torch.eagerc.manual_seed(123)
    assert torch.eagerc.initial_seed() == 123
    state = torch.eagerc.get_rng_state()
    # On host memory the CPU's (mt19937) generator: same seed, same state bytes as a CPU
    # generator's (tests/test_device_generators.py).
    own = torch.Generator().manual_seed(123).get_state()
    assert torch.equal(state[:own.numel()], own)
    torch.eagerc.manual_seed(7)
    assert not torch.equal(torch.eagerc.get_rng_state(), state)
    torch.eagerc.set_rng_state(state)
    assert torch.equal(torch.eagerc.get_rng_state(), state)
    torch.manual_seed(5)  # reaches the device through torch.eagerc.manual_seed_all
    assert torch.eagerc.initial_seed() == 5
    assert torch.Generator(device="eagerc").device == torch.device("eagerc:0")


@pytest.mark.slow  # a training step twice on the device (35 s on a busy 2-core machine); the
# device's RNG state is tested above, its training in tests/test_device_module_conversion.py
def test_checkpoint_with_dropout_on_the_device_matches_eager():
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 4))
    x = torch.randn(16, 8)
    grads = []
    for use_checkpoint in (False, True):
        model = block.to("eagerc")
        model.zero_grad()
        torch.manual_seed(3)
        dx = x.to("eagerc")
        out = checkpoint(model, dx, use_reentrant=False) if use_checkpoint else model(dx)
        out.square().sum().backward()
        grads.append([p.grad.cpu() for p in model.parameters()])
    for plain, recomputed in zip(*grads):
        assert torch.equal(plain, recomputed)


@pytest.mark.slow
def test_register_yields_to_another_privateuse1_backend():
    code = textwrap.dedent(
        """
        import warnings, torch
        torch.utils.rename_privateuse1_backend("otherdev")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import eagerc.device
            results = (eagerc.device.register(), eagerc.device.register())
        # register()'s own warning (importing eagerc also says why it does not serve
        # otherdev: tests/test_vendor_example.py)
        messages = [str(w.message) for w in caught if "PrivateUse1 already belongs" in str(w.message)]
        print(results, len(messages), "'otherdev'" in messages[0],
              "eagerc.enable('otherdev')" in messages[0],
              torch._C._dispatch_has_kernel_for_dispatch_key(
                  "aten::empty.memory_format", "PrivateUse1"))
        """
    )
    repo = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=repo)
    assert out.stdout.split("\n")[-2] == "(False, False) 1 True True False"
