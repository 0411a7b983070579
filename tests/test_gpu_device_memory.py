"""Memory statistics, streams, events and pinned memory of the eagerc device on GPU memory
(EAGERC_BACKING=cuda, docs/accelerator.md): its statistics are cuda:N's caching allocator's,
its streams CUDA streams of the same id (the device's compiled kernels and copies run on
them), its events CUDA events, its pinned memory CUDA's page-locked memory. Each test runs
a fresh process (the backing is chosen at import); skipped where torch sees no CUDA GPU.
The host-memory checks: tests/test_device_memory.py, tests/test_device_streams.py."""
from __future__ import annotations


import pytest
import torch
from gpu_device_runner import run_on_gpu_device as _run

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# Enough GPU cycles (torch.cuda._sleep) that work queued behind them is still pending when
# the host looks at once.
SLEEP = """
def busy(cycles=2_000_000_000):
    torch.cuda._sleep(cycles)
"""


def run_on_gpu_device(script: str, cache) -> str:
    return _run(script, cache, prelude=SLEEP)


def test_memory_statistics_are_the_cuda_caching_allocators(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        from accelerate.utils.memory import release_memory
        torch.accelerator.empty_cache()
        torch.accelerator.reset_peak_memory_stats()
        before = torch.eagerc.memory_allocated()
        assert before == torch.cuda.memory_allocated() == torch.accelerator.memory_allocated()
        x = torch.empty(1 << 20, device="eagerc")  # 4 MiB
        assert torch.eagerc.memory_allocated() - before >= 4 << 20
        assert torch.eagerc.memory_allocated() == torch.cuda.memory_allocated()
        assert torch.eagerc.memory_reserved() == torch.cuda.memory_reserved() >= 4 << 20
        stats, cuda = torch.eagerc.memory_stats(), torch.cuda.memory_stats()
        for key in ("allocated_bytes.all.current", "reserved_bytes.all.current", "allocation.all.current",
                    "segment.all.current", "num_device_alloc", "num_alloc_retries"):
            assert stats[key] == cuda[key], key
        assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == stats["allocated_bytes.all.current"]
        y = torch.randn(256, 256).to("eagerc") * 2  # a compiled kernel's output counts too
        assert torch.eagerc.memory_allocated() - before >= (4 << 20) + 256 * 256 * 4
        del x, y
        assert torch.eagerc.memory_allocated() == before
        assert torch.eagerc.max_memory_allocated() >= before + (4 << 20)
        assert torch.eagerc.memory_reserved() >= 4 << 20  # cached by CUDA's allocator
        release_memory()  # accelerate: torch.accelerator.empty_cache() on the device
        assert torch.cuda.memory_reserved() < 4 << 20
        torch.eagerc.reset_peak_memory_stats()
        assert torch.eagerc.max_memory_allocated() == torch.cuda.max_memory_allocated() == before
        torch.eagerc.reset_accumulated_memory_stats()
        assert torch.cuda.memory_stats()["num_device_alloc"] == 0
        free, total = torch.eagerc.mem_get_info()
        assert 0 < free <= total == torch.cuda.mem_get_info()[1]
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_streams_are_cuda_streams_and_kernels_run_on_them(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        x = torch.randn(512, 512).to("eagerc")
        (x * 2).cpu()  # compiled before the timed part
        # The record_stream part's ops too: a compile inside it outlasts busy().
        (torch.zeros(1 << 20, device="eagerc").add_(1) + 1).cpu()
        side = torch.eagerc.Stream()
        assert torch.Stream("eagerc").stream_id != side.stream_id
        with torch.eagerc.stream(side):
            assert torch.cuda.current_stream().stream_id == side.stream_id
            assert torch.accelerator.current_stream() == side
            start = torch.eagerc.Event(enable_timing=True)
            end = torch.eagerc.Event(enable_timing=True)
            start.record()
            busy()
            y = x * 2            # queued on the side stream, behind busy()
            end.record()
        assert torch.cuda.current_stream().stream_id == torch.eagerc.default_stream().stream_id == 0
        assert not side.query() and not end.query()  # still running
        assert torch.eagerc.current_stream().query()  # the default stream has nothing queued
        torch.eagerc.current_stream().wait_stream(side)
        z = y + 1                # on the default stream, after the side stream's work
        end.synchronize()
        assert end.query() and start.elapsed_time(end) > 1.0  # milliseconds, busy() included
        torch.testing.assert_close(z.cpu(), x.cpu() * 2 + 1)
        # torch.Stream / torch.Event and torch.accelerator on the device.
        other = torch.Stream("eagerc")
        torch.accelerator.set_stream(other)
        busy()
        ev = other.record_event()
        assert not ev.query()
        torch.accelerator.set_stream(torch.eagerc.default_stream())
        torch.accelerator.current_stream().wait_event(ev)
        torch.accelerator.synchronize()
        assert ev.query() and other.query()
        # record_stream: a default-stream block in use on a busy side stream is not handed
        # out again when freed (without it, the next allocation of its size reuses it).
        used = torch.zeros(1 << 20, device="eagerc")
        with torch.eagerc.stream(side):
            busy()
            used.add_(1)
        used.record_stream(side)
        old = used.data_ptr()
        del used
        fresh = torch.empty(1 << 20, device="eagerc")   # the default stream's allocation
        assert fresh.data_ptr() != old and not side.query()
        torch.accelerator.synchronize()
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out


def test_pinned_memory_is_cuda_pinned_and_copies_are_asynchronous(tmp_path):
    out = run_on_gpu_device("""
        import torch, eagerc
        host = torch.randn(1 << 22)
        assert not host.is_pinned()
        pinned = host.pin_memory()
        assert pinned.is_pinned() and pinned.device.type == "cpu"
        side = torch.eagerc.Stream()
        with torch.eagerc.stream(side):
            busy()
            on_device = pinned.to("eagerc", non_blocking=True)  # queued behind busy()
            assert not side.query()  # the copy did not wait: it is asynchronous
        side.synchronize()
        torch.testing.assert_close(on_device.cpu(), host)
        data = torch.utils.data.TensorDataset(torch.arange(24.0).reshape(12, 2))
        loader = torch.utils.data.DataLoader(data, batch_size=5, pin_memory=True)
        assert all(b.is_pinned() for (b,) in loader)
        if hasattr(torch.accelerator, "empty_host_cache"):  # torch >= 2.12
            torch.accelerator.empty_host_cache()
        print("OK")
    """, tmp_path / "cache")
    assert "OK" in out
