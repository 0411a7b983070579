"""Streams and events of the eagerc device on host memory: torch.Stream("eagerc"),
torch.Event("eagerc"), torch.accelerator's stream calls and torch.eagerc's stream API
(docs/accelerator.md). On host memory a stream is a name, always idle; an event is complete
once recorded and keeps its time. The CUDA-stream checks on GPU memory:
tests/test_gpu_device_memory.py."""
from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import torch

import eagerc  # noqa: F401
from eagerc import _config

pytestmark = pytest.mark.skipif(_config.device_backing() != "cpu", reason="host-memory streams")


def test_new_streams_are_distinct_and_idle():
    a, b = torch.Stream("eagerc"), torch.Stream(device="eagerc:0", priority=-1)
    assert a.device == b.device == torch.device("eagerc", 0)
    assert a != b and a.stream_id != b.stream_id != 0
    assert a.query() and b.query()
    a.synchronize()
    default = torch.accelerator.current_stream()
    assert default.stream_id == 0 and default.device == torch.device("eagerc", 0)


def test_set_stream_and_contexts_round_trip():
    side = torch.Stream("eagerc")
    default = torch.accelerator.current_stream()
    torch.accelerator.set_stream(side)
    try:
        assert torch.accelerator.current_stream() == side
        assert torch.eagerc.current_stream() == side
    finally:
        torch.accelerator.set_stream(default)
    assert torch.accelerator.current_stream() == default
    with side:  # torch.Stream's own context
        assert torch.accelerator.current_stream() == side
    with torch.eagerc.stream(side):
        assert torch.eagerc.current_stream() == side
        with torch.eagerc.stream(None):
            assert torch.eagerc.current_stream() == side
        x = torch.randn(8).to("eagerc") * 2  # work issued on a side stream runs as usual
    assert torch.eagerc.current_stream() == default == torch.eagerc.default_stream()
    assert x.cpu().shape == (8,)


def test_current_stream_is_per_thread():
    side = torch.eagerc.Stream()
    seen = {}
    with torch.eagerc.stream(side):
        worker = threading.Thread(target=lambda: seen.update(s=torch.accelerator.current_stream()))
        worker.start()
        worker.join()
    assert seen["s"].stream_id == 0


def test_events_record_wait_and_time():
    side = torch.eagerc.Stream()
    start, end = torch.Event("eagerc", enable_timing=True), torch.eagerc.Event(enable_timing=True)
    assert start.query()  # not recorded: complete
    start.record(side)
    y = torch.randn(64, 64).to("eagerc").sum()
    end.record()
    assert start.query() and end.query()
    end.synchronize()
    torch.accelerator.current_stream().wait_event(end)
    torch.accelerator.current_stream().wait_stream(side)
    recorded = side.record_event(torch.eagerc.Event())
    assert recorded.query() and isinstance(recorded, torch.eagerc.Event)
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0
    assert y.item() == y.cpu().item()


def test_elapsed_time_needs_timing_events():
    a, b = torch.Event("eagerc"), torch.Event("eagerc")
    a.record(); b.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)


def test_synchronize_calls_and_stream_types():
    torch.accelerator.synchronize()
    torch.accelerator.synchronize("eagerc:0")
    torch.eagerc.synchronize()
    s = torch.eagerc.Stream()
    assert isinstance(s, torch.Stream) and isinstance(torch.eagerc.current_stream(), torch.eagerc.Stream)
    assert isinstance(torch.eagerc.Event(), torch.Event)
    assert isinstance(torch.Event("eagerc"), torch.eagerc.Event)
    assert not isinstance(torch.Event("cpu"), torch.eagerc.Event)
    wrapped = torch.eagerc.Stream(stream_id=s.stream_id, device_index=s.device_index,
                                  device_type=s.device_type)
    assert wrapped == s
    with pytest.raises(ValueError, match="exactly one device"):
        torch.eagerc.Stream("eagerc:1")


def test_record_stream_is_accepted_and_checks_the_streams_device():
    x = torch.ones(4, device="eagerc")
    x.record_stream(torch.Stream("eagerc"))  # host memory: every kernel has already finished
    torch.testing.assert_close(x.cpu(), torch.ones(4))
    with pytest.raises(RuntimeError, match="record_stream expects a stream of eagerc"):
        x.record_stream(torch.Stream("cpu"))


def test_torch_initializes_the_device_once_so_accelerator_synchronize_runs():
    # torch.accelerator.synchronize() returns at once for a device that torch's lazy
    # initialisation never marked initialized (a backend module without _lazy_init): on GPU
    # memory it returned before the streams' work had finished.
    script = ("import torch, eagerc\n"
              "calls = []\n"
              "real = torch.eagerc._lazy_init\n"
              "torch.eagerc._lazy_init = lambda: (calls.append(1), real())\n"
              "torch.ones(2).to('eagerc')\n"
              "torch.accelerator.synchronize()\n"
              "torch.empty(3, device='eagerc')\n"  # a factory, no kernel to compile
              "print(len(calls))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "1"
