"""``torch.eagerc``'s streams and events, named as ``torch.cuda``'s.

They are ``torch.Stream`` and ``torch.Event`` on the eagerc device, whose device guard
(csrc/device/guard.cpp) implements them. On host memory every call has finished when it
returns, so a stream is a name (each new one a new id; the current one is kept per
thread), every stream is idle, every event complete, and a wait is already satisfied; an
event records the time it was recorded at, so ``elapsed_time`` measures host time. On GPU
memory (``EAGERC_BACKING=cuda``) an eagerc stream *is* the CUDA stream of the same id on
the same GPU and its events are CUDA events: the device's kernels and copies run on CUDA's
current stream, which is the eagerc device's current stream.

    >>> import torch, eagerc
    >>> side = torch.eagerc.Stream()
    >>> with torch.eagerc.stream(side):
    ...     torch.eagerc.current_stream() == side
    True
    >>> torch.eagerc.current_stream() == torch.eagerc.default_stream()
    True
"""
from __future__ import annotations

import contextlib

import torch

from eagerc.device import naming

__all__ = ["Event", "Stream", "current_stream", "default_stream", "set_stream", "stream"]


def _device(device) -> torch.device:
    return torch.device(naming.NAME, naming.index(device))


class Stream(torch.Stream):
    """A stream of the eagerc device: ``Stream(device=None, priority=0)`` makes a new one
    on `device` (the current device when None), as torch.cuda.Stream.

        >>> import torch, eagerc
        >>> s = torch.eagerc.Stream(); s.query()
        True
    """

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # an existing stream, by its id, index and type
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)


class _EventType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "eagerc"


class Event(metaclass=_EventType):
    """An event of the eagerc device, as torch.cuda.Event: a torch.Event on the current
    device (not a subclass: torch.Event's elapsed_time and Stream.record_event accept
    exactly torch.Event), which isinstance(e, torch.eagerc.Event) recognizes.

        >>> import torch, eagerc
        >>> start, end = torch.eagerc.Event(enable_timing=True), torch.eagerc.Event(enable_timing=True)
        >>> start.record(); end.record(); end.synchronize()
        >>> start.elapsed_time(end) >= 0
        True
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return torch.Event(device=_device(None), enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def _as_stream(found: torch.Stream) -> Stream:
    return Stream(stream_id=found.stream_id, device_index=found.device_index,
                  device_type=found.device_type)


def current_stream(device=None) -> Stream:
    """The current stream of `device` (the current device when None), for this thread."""
    return _as_stream(torch.accelerator.current_stream(_device(device).index))


def default_stream(device=None) -> Stream:
    """The default stream of `device`: id 0, as CUDA's."""
    current = torch.accelerator.current_stream(_device(device).index)
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Make `stream` the current stream of its device, for this thread."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


def stream(stream: torch.Stream | None):
    """Context manager that makes `stream` current on its device (None: no change), as
    torch.cuda.stream; the previous device and stream come back on exit."""
    return contextlib.nullcontext() if stream is None else _StreamContext(stream)


class _StreamContext:
    def __init__(self, stream: torch.Stream):
        self.stream = stream
        self.previous: list = []  # (device index, that device's stream), per entry

    def __enter__(self):
        # set_stream makes the stream's device current too: both are put back on exit.
        self.previous.append((torch.accelerator.current_device_index(),
                              torch.accelerator.current_stream(self.stream.device_index)))
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        index, previous = self.previous.pop()
        torch.accelerator.set_stream(previous)
        torch.accelerator.set_device_index(index)
        return False
