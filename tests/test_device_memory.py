"""Memory statistics of the eagerc device on host memory: torch.accelerator's memory calls
and torch.eagerc.memory_* read the device's allocator (a c10 DeviceAllocator), with numbers
that move as tensors are allocated and freed; and pinned host memory (docs/accelerator.md).
The same checks on GPU memory: tests/test_gpu_device_memory.py."""
from __future__ import annotations

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
    x = torch.empty(100, device="eagerc")
    y = torch.empty(100, device="eagerc"); del y
    torch.accelerator.reset_accumulated_memory_stats()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.allocated"] == stats["allocated_bytes.all.freed"] == 0
    assert stats["num_device_alloc"] == 0
    assert stats["allocated_bytes.all.current"] == _block(400)
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
