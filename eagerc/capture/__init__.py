"""Whole-program capture after MagPy (USENIX ATC'24): monitor a real run, record a RefGraph,
and turn the run into guard + mock + one operator graph compiled as a unit.

    >>> import torch
    >>> from eagerc.capture import capture, capture_stats
    >>> double = capture(lambda x: x * 2, backend="eager")
    >>> double(torch.ones(2)).tolist()
    [2.0, 2.0]
"""
from .api import capture, capture_stats

__all__ = ["capture", "capture_stats"]
