"""The caller's random streams, kept across work eagerc does on a miss.

Eager's check of a random op runs the op (it draws), and Inductor's compile-time
autotuning runs kernels on random example inputs (torch.randn on the kernel's GPU): both
would advance the generators a user seeded, so a kernel's first call would not follow
torch.manual_seed while every later call does.

Only the thread that owns the streams can keep them: on the background compiler's thread
(eagerc/per_op/background.py) a restore would rewind the caller's draws made meanwhile,
and a draw would move them. So that thread draws nothing from the process's generators and
restores none (`elsewhere`): a random op is never compiled there (its check draws; the
resolver compiles it on the caller's thread), the save and restore Inductor wraps around
every compile is a no-op there, and autotuning's example inputs come from a private
generator (tests/test_background_random_streams.py).
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

from eagerc.aten_meta import storage_extent

_thread = threading.local()


def draws(op) -> bool:
    """`op` draws from a random generator (ATen tags every such op)."""
    return torch.Tag.nondeterministic_seeded in op.tags


@contextlib.contextmanager
def kept():
    """Within the block, draw as you like: the CPU generator's state and, where CUDA is
    initialized, every GPU's are put back afterwards (the eagerc device's default
    generators are these: csrc/device/hooks.cpp). Only for the thread that owns the
    streams (raises RuntimeError within `elsewhere`)."""
    if not _here():
        raise RuntimeError("random_streams.kept() on a thread that does not own the random "
                           "streams: its restore would rewind the caller's draws")
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        yield


@contextlib.contextmanager
def elsewhere():
    """For a thread that runs beside the caller's (the background compiler), which must not
    draw from the process's generators: within the block, on this thread, restoring a
    generator's state does nothing, and Inductor's compile-time autotuning draws its
    example inputs from a private generator.

    Inductor and AOTAutograd wrap their work in a save and restore of the process's
    generators (preserve_rng_state around every compile, fork_rng): here the restore would
    rewind every draw the caller made meanwhile, and with nothing drawn on this thread
    there is nothing to restore."""
    _install()
    _thread.elsewhere = True
    try:
        yield
    finally:
        _thread.elsewhere = False


def _here() -> bool:
    return not getattr(_thread, "elsewhere", False)


_inductor_example_value = None
_install_lock = threading.Lock()
# Where Python code restores a generator's state: torch.set_rng_state (fork_rng) and
# torch.random's (preserve_rng_state), torch.cuda's for the GPUs. Each is looked up
# on its module when called, so the wrapper replaces it for every caller.
_RESTORES = ((torch, "set_rng_state"), (torch.random, "set_rng_state"),
             (torch.cuda, "set_rng_state"), (torch.cuda.random, "set_rng_state"))


def _install() -> None:
    """Wrap the restores and Inductor's example values, once per process."""
    global _inductor_example_value
    with _install_lock:
        if _inductor_example_value is not None:
            return
        from torch._inductor.select_algorithm import AlgorithmSelectorCache

        for module, name in _RESTORES:
            setattr(module, name, _restored_here(getattr(module, name)))
        # The generated autotuning code looks it up on the class when it runs.
        _inductor_example_value = AlgorithmSelectorCache.generate_example_value
        AlgorithmSelectorCache.generate_example_value = staticmethod(_example_value)


def _restored_here(restore):
    @functools.wraps(restore)
    def restore_on_the_owning_thread(*args, **kwargs):
        if _here():
            return restore(*args, **kwargs)
        return None  # this thread drew nothing: a restore would rewind the caller's draws

    return restore_on_the_owning_thread


def _example_value(size, stride, device, dtype, extra_size, allocation_size=None):
    """Inductor's example value for autotuning (values only steer timings) on the owning
    thread; elsewhere the same sizes and strides, drawn from a generator of its own."""
    if _here():
        return _inductor_example_value(size, stride, device, dtype, extra_size, allocation_size)
    shape = size if allocation_size is None else allocation_size
    extent = extra_size + storage_extent(shape, stride, 0)
    if dtype.is_floating_point and dtype.itemsize > 1:
        private = torch.Generator(device=device)
        private.manual_seed(0)
        base = torch.randn(extent, dtype=dtype, device=device, generator=private)
    else:  # zeros for integers and bools as Inductor's; for 1-byte floats too
        base = torch.zeros(extent, dtype=dtype, device=device)
    return base.as_strided(size, stride)
