"""aten::mm and aten::addmm through their unboxed kernels (csrc/unboxed_mm.cpp), in
override mode on CPU and CUDA and on the eagerc device: the typed signature has the boxed one's
bytes, so a kernel compiled through the boxed holder serves the typed calls (a hit counts
as a hit, nothing compiles twice); results are eager's."""
import contextlib

import pytest
import torch

import eagerc
from eagerc import _C, _config
from eagerc.testing import assert_close


def _pair(shape, view="c", device="cpu"):
    """A CPU tensor of `shape` and the same on `device` with the same strides: contiguous
    ("c"), a transposed view ("t"), or every other column of a wider tensor ("s")."""
    if view == "t":
        base = torch.randn(shape[::-1])
        make = lambda b: b.t()  # noqa: E731
    elif view == "s":
        base = torch.randn(shape[0], shape[1] * 2)
        make = lambda b: b[:, ::2]  # noqa: E731
    else:
        base = torch.randn(shape)
        make = lambda b: b  # noqa: E731
    cpu, dev = make(base), make(base.to(device))
    assert cpu.stride() == dev.stride()
    return cpu, dev


MM_CASES = [  # (self shape, view), (mat2 shape, view)
    (((8, 5), "c"), ((5, 3), "c")),
    (((6, 4), "t"), ((4, 7), "c")),
    (((6, 4), "c"), ((4, 7), "t")),
    (((6, 4), "t"), ((4, 7), "t")),
    (((3, 4), "s"), ((4, 5), "c")),
    (((1, 9), "c"), ((9, 1), "c")),
    (((0, 5), "c"), ((5, 3), "c")),
    (((64, 64), "c"), ((64, 64), "c")),
]

ADDMM_CASES = [  # self shape, (mat1 shape, view), (mat2 shape, view), beta, alpha
    ((3,), ((8, 5), "c"), ((5, 3), "c"), 1, 1),
    ((8, 3), ((8, 5), "t"), ((5, 3), "c"), 0.5, 2.0),
    ((1, 3), ((8, 5), "c"), ((5, 3), "t"), 0, 3),
    ((3,), ((8, 5), "s"), ((5, 3), "c"), 2, 1),
    ((3,), ((0, 5), "c"), ((5, 3), "c"), 1, 1),
]


# Override mode on CPU and CUDA (where a GPU is), and the eagerc device (registered unless a
# GPU is present without EAGERC_BACKING=cuda or EAGERC_DEVICE=1).
DEVICES = ["cpu",
           pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
           pytest.param("eagerc", marks=pytest.mark.skipif(torch._C._get_privateuse1_backend_name() != "eagerc",
                                                           reason="the eagerc device is not registered"))]


def _key_tensors(on_home_aliases, host, on_device):
    """The tensors the typed kernel computes its key on: the call's own, or, when the op's
    kernels run on aliases of the memory's home, tensors of that home with the same sizes,
    strides and offsets: `host` for CPU memory, CUDA tensors for GPU memory."""
    if not on_home_aliases:
        return on_device
    if on_device[0].device.type != "eagerc" or _config.device_backing() == "cpu":
        return host

    def cuda_like(t):
        flat = torch.empty(t.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype,
                           device=torch.device("cuda", t.device.index or 0))
        return flat.as_strided(t.shape, t.stride(), t.storage_offset())
    return tuple(cuda_like(t) for t in on_device)


def _serving(device, op):
    # The eagerc device serves every op already; override mode is enabled per op.
    return contextlib.nullcontext() if device == "eagerc" else eagerc.enabled(device, ops=[op])


def _check(miss_keys, op, device, call, expected, typed_key):
    stats_key = f"{op}@{ {'cpu': 'CPU', 'cuda': 'CUDA'}.get(device, 'PrivateUse1')}"
    for _ in range(3):  # a miss (through the boxed holder), then typed hits
        out = call()
        assert out.device.type == device
        assert_close(out.cpu(), expected)
    stats = eagerc.stats()["ops"][stats_key]
    # The key the typed kernel computes: on the tensors it runs on (the device's own, or
    # aliases of them on the memory's home when the op's kernels call its ATen functions), with value
    # scalars in the key once tracing them lifted failed for the op.
    state = _C._op_stats()[stats_key]
    boxed = [key for name, key in miss_keys if name == op]
    assert boxed and boxed[-1] == typed_key(state["on_home_aliases"], state["specialize_values"]), boxed
    assert stats["compiles"] + stats["disk_loads"] == 1, stats
    assert (stats["misses"], stats["hits"], stats["fallbacks"]) == (1, 2, 0), stats


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", MM_CASES, ids=range(len(MM_CASES)))
def test_mm_typed_key_is_the_boxed_key(miss_keys, case, device):
    (x, dx), (y, dy) = (_pair(*spec, device=device) for spec in case)
    # The reference is eager on the host, or native CUDA itself (cuBLAS sums in another order).
    expected = torch.mm(dx, dy).cpu() if device == "cuda" else torch.mm(x, y)
    with _serving(device, "aten::mm"):
        _check(miss_keys, "aten::mm", device, lambda: torch.mm(dx, dy), expected,
               lambda on_home, _: _C._mm_signature_key(*_key_tensors(on_home, (x, y), (dx, dy))))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ADDMM_CASES, ids=range(len(ADDMM_CASES)))
def test_addmm_typed_key_is_the_boxed_key(miss_keys, case, device):
    bshape, m1, m2, beta, alpha = case
    b, db = _pair(bshape, device=device) if len(bshape) == 2 else (torch.randn(bshape),) * 2
    db = db.to(device)
    (x, dx), (y, dy) = _pair(*m1, device=device), _pair(*m2, device=device)
    expected = (torch.addmm(db, dx, dy, beta=beta, alpha=alpha).cpu() if device == "cuda"
                else torch.addmm(b, x, y, beta=beta, alpha=alpha))
    with _serving(device, "aten::addmm"):
        _check(miss_keys, "aten::addmm", device,
               lambda: torch.addmm(db, dx, dy, beta=beta, alpha=alpha), expected,
               lambda on_home, specialize: _C._addmm_signature_key(
                   *_key_tensors(on_home, (b, x, y), (db, dx, dy)), beta, alpha, specialize))


@pytest.mark.skipif(torch._C._get_privateuse1_backend_name() != "eagerc", reason="the eagerc device is not registered")
def test_linear_on_the_device_matches_eager_with_grad(fresh_cache):
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 4)
    dlin = torch.nn.Linear(6, 4).to("eagerc")
    dlin.load_state_dict(lin.state_dict())
    x = torch.randn(5, 6, requires_grad=True)
    dx = x.detach().to("eagerc").requires_grad_()
    for _ in range(3):
        out, dout = lin(x), dlin(dx)
        assert dout.device.type == "eagerc"
        assert_close(dout.cpu(), out)
        out.sum().backward()
        dout.sum().backward()
    assert_close(dx.grad.cpu(), x.grad)
    assert_close(dlin.weight.grad.cpu(), lin.weight.grad)
    stats = eagerc.stats()["ops"]["aten::addmm@PrivateUse1"]
    assert stats["fallbacks"] == 0 and stats["hits"] >= 2, stats
