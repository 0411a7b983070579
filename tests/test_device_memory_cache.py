"""The eagerc device's cache of freed host-memory blocks (csrc/device/allocator.cpp).

Freed device memory is kept by size and handed to the next allocation of that size;
the cache is bounded, torch.eagerc.empty_cache() returns it, and a block is cached only
once nothing (a view, a CPU alias) refers to its storage any more. Only runtime ops are
used here (allocation, copies, views), so nothing compiles.
"""
import pytest
import torch

import eagerc
import eagerc.device
from eagerc import _C

DEFAULT_LIMIT = 256 << 20


@pytest.fixture(autouse=True)
def empty_block_cache():
    assert eagerc.device.register(), "PrivateUse1 belongs to another backend in this process"
    torch.eagerc.empty_cache()
    yield
    _C._device_set_cache_limit(DEFAULT_LIMIT)
    torch.eagerc.empty_cache()


def test_a_freed_block_serves_the_next_allocation_of_its_size():
    a = torch.empty(1000, device="eagerc")
    ptr = a.data_ptr()
    del a
    assert _C._device_cached_bytes() >= 4000
    b = torch.empty(1000, device="eagerc")
    assert b.data_ptr() == ptr and ptr % 64 == 0
    assert _C._device_cached_bytes() == 0
    values = torch.arange(1000, dtype=torch.float32)
    b.copy_(values)
    assert torch.equal(b.cpu(), values)


def test_other_sizes_get_other_blocks():
    a = torch.empty(1000, device="eagerc")
    ptr = a.data_ptr()
    del a
    b = torch.empty(5000, device="eagerc")
    assert b.data_ptr() != ptr
    assert _C._device_cached_bytes() >= 4000  # the 1000-element block is still kept


def test_a_block_under_a_live_view_is_not_reused():
    values = torch.arange(64, dtype=torch.float32)
    a = values.to("eagerc")
    view = a[8:]
    ptr = a.data_ptr()
    del a
    b = torch.empty(64, device="eagerc")
    assert b.data_ptr() != ptr
    b.copy_(torch.full((64,), -1.0))
    assert torch.equal(view.cpu(), values[8:])


def test_empty_cache_returns_every_block():
    blocks = [torch.empty(n, device="eagerc") for n in (10, 100, 1000)]
    del blocks
    assert _C._device_cached_bytes() > 0
    torch.eagerc.empty_cache()
    assert _C._device_cached_bytes() == 0


def test_the_cache_is_bounded():
    _C._device_set_cache_limit(64 << 10)
    blocks = [torch.empty(4096, device="eagerc") for _ in range(8)]  # 16 KiB each
    del blocks
    assert 0 < _C._device_cached_bytes() <= 64 << 10
    _C._device_set_cache_limit(0)
    assert _C._device_cached_bytes() == 0
    a = torch.empty(4096, device="eagerc")
    del a
    assert _C._device_cached_bytes() == 0


def test_large_blocks_go_back_to_malloc():
    a = torch.empty(8 << 20, device="eagerc")  # 32 MiB
    del a
    assert _C._device_cached_bytes() == 0


def test_resize_moves_to_a_larger_block_and_keeps_values():
    values = torch.arange(16, dtype=torch.float32)
    a = values.to("eagerc")
    a.resize_(4096)
    assert torch.equal(a.cpu()[:16], values)
    assert _C._device_cached_bytes() >= 64  # the old 16-element block


def test_blocks_freed_on_other_threads_are_reused_safely():
    import threading

    made = []

    def allocate_and_fill(k):
        t = torch.empty(256, device="eagerc")
        t.copy_(torch.full((256,), float(k)))
        made.append((k, t))

    threads = [threading.Thread(target=allocate_and_fill, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keep = made[::2]
    freed = made[1::2]
    made.clear()
    del freed
    fresh = [torch.zeros(256).to("eagerc") for _ in range(4)]  # may take the freed blocks
    for k, t in keep:
        assert torch.equal(t.cpu(), torch.full((256,), float(k)))
    for t in fresh:
        assert torch.equal(t.cpu(), torch.zeros(256))
