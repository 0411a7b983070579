"""``torch.eagerc``'s memory calls, named and typed as ``torch.cuda``'s.

They read the device's allocator (csrc/device/allocator.cpp), the same object
``torch.accelerator``'s memory calls reach, so both answer alike. On host memory the
numbers are the device's own, counted in whole blocks (a request rounded up to 64 bytes,
plus a 64-byte header): a live tensor's block is allocated, a freed block kept for reuse is
reserved only, and ``empty_cache`` returns the kept blocks to malloc. On GPU memory
(``EAGERC_BACKING=cuda``) ``eagerc:N``'s memory is cuda:N's caching allocator's, so every
call answers for that allocator (native CUDA tensors of the process included).

    >>> import torch, eagerc
    >>> before = torch.eagerc.memory_allocated()
    >>> x = torch.empty(1000, device="eagerc")
    >>> torch.eagerc.memory_allocated() - before >= 4000
    True
"""
from __future__ import annotations

import collections

from eagerc.device.naming import index as _index

__all__ = [
    "empty_cache",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]


def empty_cache() -> None:
    """Return the device's cached free memory: its kept host blocks to malloc (up to
    256 MiB are kept, by size, as torch.cuda's caching allocator keeps freed memory), or on
    GPU memory CUDA's cached blocks to the driver. Reserved memory drops; allocated does not.

        >>> import torch, eagerc
        >>> x = torch.empty(1024, device="eagerc"); del x
        >>> torch.eagerc.empty_cache(); eagerc._C._device_cached_bytes()
        0
    """
    import _eagerc as _C

    _C._device_empty_cache()


def memory_stats(device=None) -> collections.OrderedDict:
    """The allocator's statistics for `device`, under torch.cuda.memory_stats's names
    (``"allocated_bytes.all.current"``, ``"reserved_bytes.large_pool.peak"``,
    ``"num_alloc_retries"``, ...), sorted.

        >>> import torch, eagerc
        >>> torch.eagerc.memory_stats()["num_ooms"]
        0
    """
    import _eagerc as _C

    return collections.OrderedDict(sorted(_C._device_memory_stats(_index(device)).items()))


def memory_allocated(device=None) -> int:
    """Bytes of the device's memory held by live tensors.

        >>> import torch, eagerc
        >>> torch.eagerc.memory_allocated() >= 0
        True
    """
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    """The most bytes live tensors held since the start or the last reset_peak_memory_stats.

        >>> import torch, eagerc
        >>> torch.eagerc.max_memory_allocated() >= torch.eagerc.memory_allocated()
        True
    """
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds: live tensors' blocks plus freed ones kept for reuse.

        >>> import torch, eagerc
        >>> torch.eagerc.memory_reserved() >= torch.eagerc.memory_allocated()
        True
    """
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    """The most bytes the allocator held since the start or the last reset_peak_memory_stats.

        >>> import torch, eagerc
        >>> torch.eagerc.max_memory_reserved() >= torch.eagerc.memory_reserved()
        True
    """
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    """Make every peak statistic its current value.

        >>> import torch, eagerc
        >>> torch.eagerc.reset_peak_memory_stats()
        >>> torch.eagerc.max_memory_allocated() == torch.eagerc.memory_allocated()
        True
    """
    import _eagerc as _C

    _C._device_reset_peak_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    """Zero the accumulated statistics: the allocated/freed totals of each entry and the
    event counts (num_alloc_retries, num_ooms, num_device_alloc, num_device_free, ...).

        >>> import torch, eagerc
        >>> torch.eagerc.reset_accumulated_memory_stats()
        >>> torch.eagerc.memory_stats()["num_device_alloc"]
        0
    """
    import _eagerc as _C

    _C._device_reset_accumulated_stats(_index(device))


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device's memory: on host memory the machine's available
    and total physical memory; on GPU memory the GPU's, as torch.cuda.mem_get_info.

        >>> import torch, eagerc
        >>> free, total = torch.eagerc.mem_get_info(); 0 < free <= total
        True
    """
    import _eagerc as _C

    return tuple(_C._device_mem_get_info(_index(device)))
