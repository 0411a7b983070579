"""The caller's random streams, kept across work eagerc does on a miss.

Eager's check of a random op runs the op (it draws), and Inductor's compile-time
autotuning runs kernels on random example inputs (torch.randn on the kernel's GPU): both
would advance the generators a user seeded, so a kernel's first call would not follow
torch.manual_seed while every later call does.

Only the thread that owns the streams can keep them: on the background compiler's thread
(eagerc/per_op/background.py) a restore would rewind the caller's draws made meanwhile. So
a random op is never compiled there (its check draws; the resolver compiles it on the
caller's thread), and what the background compiles instead draws nothing on the CPU
(tests/test_background_random_streams.py).
"""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def kept():
    """Within the block, draw as you like: the CPU generator's state and, where CUDA is
    initialized, every GPU's are put back afterwards. Only for the thread that owns the
    streams: on another thread the restore would rewind the caller's own draws."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        yield


def draws(op) -> bool:
    """`op` draws from a random generator (ATen tags every such op)."""
    return torch.Tag.nondeterministic_seeded in op.tags
