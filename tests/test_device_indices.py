"""The eagerc device's indices and size classes, on this machine's host memory: one device,
index 0, refused indices raise what they say; and a tensor's size class in the signature
follows where its memory lives (a GPU home: the GPU classes), not its dispatch key.

Two indices on GPU memory (eagerc:0, eagerc:1) are tested by tests/test_gpu_two_devices.py
where two GPUs are lent.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc  # noqa: F401  (registers the device)
from eagerc import _C, _config

pytestmark = pytest.mark.skipif(_config.device_backing() != "cpu",
                                reason="host memory's single index (unset EAGERC_BACKING)")


def test_host_memory_has_one_index_and_refuses_others():
    assert torch.eagerc.device_count() == 1 == torch.accelerator.device_count()
    assert torch.eagerc.current_device() == 0
    with torch.eagerc.device(0):
        assert torch.empty(2, device="eagerc").device == torch.device("eagerc:0")
    with torch.eagerc.device(None):
        assert torch.eagerc.current_device() == 0
    with pytest.raises(RuntimeError, match="device index 1 is out of range"):
        torch.empty(2, device="eagerc:1")
    for bad in (1, "eagerc:1", torch.device("eagerc", 2)):
        with pytest.raises(ValueError, match="exactly one device"):
            torch.eagerc.set_device(bad)
        with pytest.raises(ValueError, match="exactly one device"):
            torch.eagerc.device(bad)
    with pytest.raises(ValueError, match="expected an eagerc device"):
        torch.eagerc.set_device("cpu")
    assert len(torch.eagerc.default_generators) == 1
    assert torch.eagerc.default_generators[0].device == torch.device("eagerc:0")


def _mm_key(n: int, device: str) -> bytes:
    a = torch.empty(n, n, device=device)
    return _C._mm_signature_key(a, a)


def test_host_memory_tensors_take_the_host_size_classes():
    # The call's class byte last: 'S' below ATen's grain size, 'P' at or above it; no
    # per-tensor class (one host kernel serves every size of its class).
    small, large = _mm_key(64, "eagerc"), _mm_key(256, "eagerc")
    assert small[-1:] == b"S" and large[-1:] == b"P"
    assert small[:-1] == large[:-1]


def test_a_gpu_home_gives_a_devices_tensors_the_gpu_size_classes():
    # Meta tensors stand in for a device whose memory is declared to live on the GPU (the
    # eagerc device on GPU memory declares cuda the same way); in a fresh process, since
    # the declaration is for the process.
    script = textwrap.dedent("""
        import torch, eagerc
        from eagerc import _C
        def key(n):
            a = torch.empty(n, n, device="meta")
            return _C._mm_signature_key(a, a)
        before = [key(n) for n in (64, 1024, 8192)]
        _C._set_memory_home("meta", "cuda")
        after = [key(n) for n in (64, 1024, 8192)]
        print(repr((before, after)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr
    # Host classes: per call, by the largest tensor (64x64 'S'; the larger two 'P').
    assert [k[-1:] for k in before] == [b"S", b"P", b"P"]
    # GPU classes: per tensor, small (< 32K elements) / medium (< 4M) / large, after each
    # tensor's alignment byte; the call's host class is then 'S' whatever the size.
    assert [k[-1:] for k in after] == [b"S", b"S", b"S"]
    for k, cls in zip(after, b"sml"):
        assert k.count(b"CA" + bytes([cls])) == 2, (k, chr(cls))
    assert len({k for k in after}) == 3
