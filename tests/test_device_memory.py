"""Memory statistics of the eagerc device on host memory: torch.accelerator's memory calls
and torch.eagerc.memory_* read the device's allocator (a c10 DeviceAllocator), with numbers
that move as tensors are allocated and freed; and pinned host memory (docs/accelerator.md).
The same checks on GPU memory: tests/test_gpu_device_memory.py.

Every eagerc tensor counts, whichever path made it: the device's allocator, a kernel
compiled for the device's memory, or a CPU kernel run on zero-copy aliases (a random
factory compiled for the CPU generator, ATen's kernel such as nonzero's, a typed
convolution hit, a background miss's interim answer), whose fresh output the device takes
over with no copy (result_on_device in csrc/host_alias.h). Importing eagerc changes
nothing for CPU programs: the CPU allocator stays the process's own."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc  # noqa: F401
from eagerc import _C, _config

pytestmark = pytest.mark.skipif(_config.device_backing() != "cpu",
                                reason="host-memory statistics")

BLOCK = 64  # the allocator's alignment and its block header


def _block(nbytes: int) -> int:
    """The bytes a request of `nbytes` takes: rounded up to the alignment, plus the header."""
    return -(-nbytes // BLOCK) * BLOCK + BLOCK


@pytest.fixture(autouse=True)
def fresh_stats():
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.reset_accumulated_memory_stats()
    yield
    torch.accelerator.empty_cache()


def test_allocated_grows_by_the_tensors_block_and_peak_stays_after_free():
    before = torch.accelerator.memory_allocated()
    x = torch.empty(1000, 250, device="eagerc")  # 1 MB: the large pool
    assert torch.accelerator.memory_allocated() - before == _block(1_000_000)
    assert torch.accelerator.max_memory_allocated() >= before + _block(1_000_000)
    del x
    assert torch.accelerator.memory_allocated() == before
    assert torch.accelerator.max_memory_allocated() >= before + _block(1_000_000)
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == before


def test_reserved_keeps_freed_blocks_until_empty_cache():
    reserved = torch.accelerator.memory_reserved()
    x = torch.empty(4096, device="eagerc")
    assert torch.accelerator.memory_reserved() == reserved + _block(4 * 4096)
    del x  # kept for reuse: still reserved, no longer allocated
    assert torch.accelerator.memory_reserved() == reserved + _block(4 * 4096)
    assert _C._device_cached_bytes() == _block(4 * 4096)
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved() == reserved
    assert torch.accelerator.max_memory_reserved() >= reserved + _block(4 * 4096)


def test_stats_count_requests_segments_and_pools():
    before = torch.accelerator.memory_stats()  # tensors other tests keep alive count too
    small = torch.empty(10, device="eagerc")          # 40 bytes requested
    large = torch.empty(2 << 20, dtype=torch.uint8, device="eagerc")
    stats = torch.accelerator.memory_stats()
    for key, grown in (("allocation.all.current", 2), ("active.all.current", 2),
                       ("allocation.small_pool.current", 1), ("allocation.large_pool.current", 1),
                       ("allocated_bytes.large_pool.current", _block(2 << 20)),
                       ("requested_bytes.all.current", 40 + (2 << 20)),
                       ("num_device_alloc", 2), ("segment.all.current", 2)):  # fresh blocks
        assert stats[key] - before[key] == grown, key
    del small, large
    stats = torch.accelerator.memory_stats()
    assert stats["allocation.all.current"] == before["allocation.all.current"]
    assert stats["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert stats["allocation.all.freed"] - before["allocation.all.freed"] == 2
    assert stats["inactive_split.all.current"] == 0
    # A reused block is a new allocation but no new segment.
    segments, device_allocs = stats["segment.all.current"], stats["num_device_alloc"]
    again = torch.empty(10, device="eagerc")
    stats = torch.accelerator.memory_stats()
    assert stats["segment.all.current"] == segments and stats["num_device_alloc"] == device_allocs
    del again


def test_reset_accumulated_zeroes_totals_not_current():
    # Device tensors other tests of this process still hold count in "current" too.
    base = torch.accelerator.memory_stats()["allocated_bytes.all.current"]
    x = torch.empty(100, device="eagerc")
    y = torch.empty(100, device="eagerc"); del y
    torch.accelerator.reset_accumulated_memory_stats()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.allocated"] == stats["allocated_bytes.all.freed"] == 0
    assert stats["num_device_alloc"] == 0
    assert stats["allocated_bytes.all.current"] == base + _block(400)
    del x


def test_torch_eagerc_memory_functions_answer_as_torch_accelerator():
    x = torch.randn(300, 7).to("eagerc")
    stats = torch.eagerc.memory_stats()
    assert stats == torch.accelerator.memory_stats()
    assert list(stats) == sorted(stats)
    assert torch.eagerc.memory_allocated() == torch.accelerator.memory_allocated() > 0
    assert torch.eagerc.memory_allocated("eagerc:0") == torch.eagerc.memory_allocated(0)
    assert torch.eagerc.max_memory_allocated() == torch.accelerator.max_memory_allocated()
    assert torch.eagerc.memory_reserved() == torch.accelerator.memory_reserved()
    assert torch.eagerc.max_memory_reserved() == torch.accelerator.max_memory_reserved()
    del x
    torch.eagerc.empty_cache()  # reserved is then what live tensors hold
    assert torch.eagerc.memory_reserved() == torch.eagerc.memory_allocated()
    assert _C._device_cached_bytes() == 0
    torch.eagerc.reset_peak_memory_stats()
    assert torch.eagerc.max_memory_allocated() == torch.eagerc.memory_allocated()
    torch.eagerc.reset_accumulated_memory_stats()
    assert torch.eagerc.memory_stats()["allocation.all.allocated"] == 0
    free, total = torch.eagerc.mem_get_info()
    assert 0 < free <= total == torch.accelerator.get_memory_info()[1]
    with pytest.raises(ValueError, match="exactly one device"):
        torch.eagerc.memory_allocated(1)


def test_compiled_kernel_outputs_count():
    x = torch.randn(64, 64).to("eagerc")
    before = torch.eagerc.memory_allocated()
    y = torch.softmax(x, -1)  # a compiled kernel's output, from the device's allocator
    assert torch.eagerc.memory_allocated() - before >= y.numel() * 4
    del y
    assert torch.eagerc.memory_allocated() == before


def test_empty_cache_through_accelerate_and_without_tensors():
    accelerate_memory = pytest.importorskip("accelerate.utils.memory")
    x = torch.empty(1000, device="eagerc"); del x
    assert torch.eagerc.memory_reserved() > torch.eagerc.memory_allocated()
    accelerate_memory.release_memory()  # torch.accelerator.empty_cache() on the device
    assert torch.eagerc.memory_reserved() == torch.eagerc.memory_allocated()


def test_pin_memory_gives_pinned_cpu_tensors():
    x = torch.randn(1000)
    allocated = torch.eagerc.memory_allocated()
    assert not x.is_pinned()
    pinned = x.pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert pinned.data_ptr() != x.data_ptr() and pinned.data_ptr() % BLOCK == 0
    torch.testing.assert_close(pinned, x)
    assert pinned.pin_memory() is pinned  # already pinned: no copy
    assert not pinned.clone().is_pinned()
    assert not torch.randn(3).to("eagerc").cpu().is_pinned()
    # Pinned memory is host memory apart from the device's: in no device statistic.
    assert torch.eagerc.memory_allocated() == allocated
    on_device = pinned.to("eagerc", non_blocking=True)
    torch.testing.assert_close(on_device.cpu(), x)
    torch.accelerator.empty_host_cache()
    assert pinned.is_pinned()  # nothing live is released


def test_pinned_view_and_empty_tensor():
    pinned = torch.arange(10.0).pin_memory()
    assert pinned[2:].is_pinned() and pinned[:5].is_pinned()  # views of a pinned storage
    empty = torch.empty(0).pin_memory()
    assert empty.numel() == 0 and empty.device.type == "cpu"


def test_dataloader_pins_batches_for_the_device():
    data = torch.utils.data.TensorDataset(torch.arange(24.0).reshape(12, 2), torch.arange(12))
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(data, batch_size=5, pin_memory=True, num_workers=workers)
        batches = list(loader)
        assert all(t.is_pinned() for batch in batches for t in batch)
        torch.testing.assert_close(torch.cat([b[0] for b in batches]), data.tensors[0])
        moved = batches[0][0].to("eagerc", non_blocking=True)
        torch.testing.assert_close(moved.cpu(), data.tensors[0][:5])


def test_a_failed_allocation_is_retried_then_counted_as_oom():
    kept = torch.empty(1000, device="eagerc"); del kept
    before = torch.eagerc.memory_stats()
    with pytest.raises(torch.OutOfMemoryError, match="out of host memory"):
        torch.empty(1 << 58, dtype=torch.uint8, device="eagerc")
    stats = torch.eagerc.memory_stats()
    assert stats["num_alloc_retries"] == before["num_alloc_retries"] + 1
    assert stats["num_ooms"] == before["num_ooms"] + 1
    assert stats["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert stats["allocation.all.current"] == before["allocation.all.current"]
    assert _C._device_cached_bytes() == 0  # the retry returned the kept blocks first


def _counts_its_block(make, nbytes: int):
    """`make()` gives one eagerc tensor over a new storage of `nbytes`: counted as one block
    of the device's (allocated; reserved, unless it takes a kept block's place; the peak),
    and given back on free (kept: still reserved)."""
    before = torch.accelerator.memory_stats()
    t = make()
    assert t.device.type == "eagerc" and t.untyped_storage().nbytes() == nbytes
    stats = torch.accelerator.memory_stats()
    for key, grown in (("allocated_bytes.all.current", _block(nbytes)),
                       ("requested_bytes.all.current", nbytes), ("allocation.all.current", 1)):
        assert stats[key] - before[key] == grown, key
    assert stats["reserved_bytes.all.current"] - before["reserved_bytes.all.current"] in (0, _block(nbytes))
    assert torch.accelerator.max_memory_allocated() >= stats["allocated_bytes.all.current"]
    del t
    after = torch.accelerator.memory_stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.current"] == before["allocation.all.current"]
    assert after["reserved_bytes.all.current"] == stats["reserved_bytes.all.current"]  # kept


@pytest.mark.parametrize("factory", [torch.randn, torch.rand])
def test_random_factories_count_their_output(factory):
    for _ in range(2):  # the miss, then the hit of the kernel compiled on CPU aliases
        _counts_its_block(lambda: factory(256, 300, device="eagerc"), 256 * 300 * 4)


def test_a_megabyte_randn_counts_as_torch_empty_does():
    before = torch.accelerator.memory_allocated()
    empty = torch.empty(1024, 1024, device="eagerc")
    by_empty = torch.accelerator.memory_allocated() - before
    x = torch.randn(1024, 1024, device="eagerc")
    assert torch.accelerator.memory_allocated() - before - by_empty == by_empty == _block(4 << 20)
    assert torch.eagerc.memory_allocated() == torch.accelerator.memory_allocated()
    assert torch.accelerator.max_memory_allocated() == before + 2 * _block(4 << 20)
    del x, empty
    assert torch.accelerator.memory_allocated() == before
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == before
    assert _C._device_cached_bytes() == 2 * _block(4 << 20)  # both kept
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved() == torch.accelerator.memory_allocated()
    assert _C._device_cached_bytes() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("size", [1024, 2048])  # 4 and 16 MiB in float32: both kept
def test_a_freed_random_tensor_stays_reserved_for_the_next_of_its_size(size, dtype):
    # TorchCTS's memory/test_allocator.py::test_allocator_tracking_and_cache, as CUDA's
    # caching allocator answers it.
    torch.accelerator.empty_cache()
    initial = torch.accelerator.memory_allocated()
    x = torch.randn(size, size, dtype=dtype, device="eagerc")
    assert torch.accelerator.memory_allocated() - initial == _block(x.nbytes)
    del x
    reserved_after_del = torch.accelerator.memory_reserved()
    assert reserved_after_del - torch.accelerator.memory_allocated() == _block(size * size * dtype.itemsize)
    y = torch.randn(size, size, dtype=dtype, device="eagerc")
    assert torch.accelerator.memory_allocated() - initial == _block(y.nbytes)
    assert torch.accelerator.memory_reserved() == reserved_after_del  # in the kept block's place
    del y
    z = torch.empty(size, size, dtype=dtype, device="eagerc")  # the device's own allocation
    assert torch.accelerator.memory_reserved() == reserved_after_del
    del z
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_allocated() == initial
    assert torch.accelerator.memory_reserved() == initial


def test_random_ops_with_a_device_generator_count_and_in_place_ones_allocate_nothing():
    g = torch.Generator(device="eagerc")
    g.manual_seed(7)
    for _ in range(2):
        _counts_its_block(lambda: torch.rand(100, 77, generator=g, device="eagerc"), 100 * 77 * 4)
        _counts_its_block(lambda: torch.normal(0.0, 1.0, size=(128, 5), generator=g, device="eagerc"),
                          128 * 5 * 4)
    e = torch.empty(128, 77, device="eagerc")
    before = torch.accelerator.memory_allocated()
    e.normal_(generator=g)
    e.normal_(generator=g)
    assert torch.accelerator.memory_allocated() == before
    assert e.std().item() == pytest.approx(1.0, abs=0.1)


def test_a_cpu_kernel_on_aliases_counts_its_output():
    torch.manual_seed(0)
    mask = torch.randn(200, 50, device="eagerc") > 0
    found = int(mask.sum().item())
    name = "aten::nonzero@PrivateUse1"
    aliased = eagerc.stats()["ops"].get(name, {}).get("aliased", 0)
    for _ in range(2):
        _counts_its_block(lambda: torch.nonzero(mask), found * 2 * 8)
    assert eagerc.stats()["ops"][name]["aliased"] == aliased + 2  # ATen's kernel on aliases


def test_a_convolution_on_aliases_counts_its_output():
    x = torch.randn(2, 4, 9, 7, device="eagerc")
    w = torch.randn(6, 2, 3, 1, device="eagerc")
    expected = torch.conv2d(x.cpu(), w.cpu(), stride=(2, 1), padding=(0, 2), dilation=(1, 3), groups=2)
    for _ in range(3):  # the miss, then typed hits on reused aliases (oneDNN's scratch and all)
        _counts_its_block(lambda: torch.conv2d(x, w, stride=(2, 1), padding=(0, 2), dilation=(1, 3),
                                               groups=2), expected.numel() * 4)
    out = torch.conv2d(x, w, stride=(2, 1), padding=(0, 2), dilation=(1, 3), groups=2)
    torch.testing.assert_close(out.cpu(), expected)


def test_a_taken_over_storage_resizes_as_the_devices_own():
    y = torch.randn(3, device="eagerc")
    a = torch.arange(1000.0, device="eagerc")
    before = torch.accelerator.memory_allocated()
    y.resize_(1000)  # a new block of the device's allocator, the old one given back
    y.copy_(a)
    torch.testing.assert_close(y.cpu(), torch.arange(1000.0))
    assert torch.accelerator.memory_allocated() - before == _block(4000) - _block(12)


@pytest.fixture
def interim_answers(fresh_cache, monkeypatch):
    """Background mode whose compile service finishes nothing: every miss is answered in
    the interim by the CPU's kernel on aliases (as tests/test_interim_answers.py does)."""
    from eagerc.per_op import background

    class StillCompiling:
        def submit(self, folder, job_id, data) -> bool:
            return True

        def outcome(self, folder, job_id):
            return None

    monkeypatch.setattr(background, "client", lambda: StillCompiling())
    monkeypatch.setattr(background, "_jobs", background.Jobs())
    background.set_mode("eagerc", "background")
    yield
    background.set_mode("eagerc", None)


def test_interim_answers_count_their_output(interim_answers):
    x = torch.empty(64, 100, device="eagerc").fill_(0.5)
    for _ in range(2):
        _counts_its_block(lambda: torch.sin(x), 64 * 100 * 4)
        _counts_its_block(lambda: x * 3, 64 * 100 * 4)
    ops = eagerc.stats()["ops"]
    assert ops["aten::sin@PrivateUse1"]["interim"] == ops["aten::mul.Tensor@PrivateUse1"]["interim"] == 2
    torch.testing.assert_close(torch.sin(x).cpu(), torch.sin(torch.full((64, 100), 0.5)))


def test_cpu_tensors_made_beside_device_calls_are_not_the_devices():
    # CPU tensors another thread makes while device calls run kernels on CPU aliases stay
    # CPU memory, counted nowhere; the device calls' outputs count and are given back.
    import threading

    x = torch.randn(100, 100, device="eagerc")
    before = torch.accelerator.memory_allocated()
    kept_on_cpu, kept_on_device, stop = [], [], threading.Event()

    def cpu_program():
        while not stop.is_set():
            kept_on_cpu.append(torch.nonzero(torch.randn(100, 100) > 0))

    thread = threading.Thread(target=cpu_program)
    thread.start()
    try:
        for _ in range(50):
            kept_on_device.append(torch.nonzero(x > 0))
            torch.randn(100, 100, device="eagerc")
    finally:
        stop.set()
        thread.join()
    assert kept_on_cpu and all(t.device.type == "cpu" for t in kept_on_cpu)
    expected = sum(_block(t.untyped_storage().nbytes()) for t in kept_on_device)
    assert torch.accelerator.memory_allocated() - before == expected
    kept_on_cpu.clear()
    assert torch.accelerator.memory_allocated() - before == expected
    kept_on_device.clear()
    assert torch.accelerator.memory_allocated() == before


def test_importing_eagerc_leaves_cpu_programs_alone():
    # A fresh interpreter: the process's CPU allocator (c10::GetCPUAllocator, read through
    # libc10's exported symbol) is the same object before and after import eagerc and after
    # device calls on CPU aliases; a CPU program gives the same numbers, counted nowhere.
    script = textwrap.dedent("""
        import ctypes, glob, os
        import torch
        lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))[0])
        get = lib._ZN3c1015GetCPUAllocatorEv
        get.restype = ctypes.c_void_p

        def program():
            torch.manual_seed(3)
            x = torch.randn(2, 4, 9, 7)
            y = torch.conv2d(x, torch.randn(6, 2, 3, 1), groups=2)
            return [y, torch.nonzero(y > 0), torch.rand(5, 5)]

        allocator, before = get(), program()
        import eagerc
        assert get() == allocator, "import eagerc changed the CPU allocator"
        after = program()
        assert all(torch.equal(a, b) for a, b in zip(before, after))
        assert torch.accelerator.memory_allocated() == 0
        on_device = torch.nonzero(torch.randn(30, 30, device="eagerc") > 0)
        assert get() == allocator, "a device call changed the CPU allocator"
        kept = torch.accelerator.memory_allocated()
        assert kept > 0
        again = program()
        assert all(torch.equal(a, b) for a, b in zip(before, again))
        assert torch.accelerator.memory_allocated() == kept
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
