"""A miss described for another process, and its replay there.

The description holds what the kernel's signature reads (the op, each tensor's sizes,
strides, storage offset, dtype and device, the other arguments as they were, the size
class) and never the caller's data. The replay allocates stand-ins with that metadata
(zero bytes: valid indices, no NaN) and calls the op on the device, so the device's own
dispatch computes the signature and compiles (or records a refusal for) exactly the key
the caller missed.

A replay's memory is its call's (a stand-in per tensor, and what the op allocates): a call
whose tensors hold more than :data:`STANDIN_BYTES_LIMIT` is not described, and compiles in
the caller's process, on the caller's own tensors. A worker's memory stays bounded by the
limit whatever the calls it serves (a 17 GB ``fill_`` had grown one to 23 GB).
"""
from __future__ import annotations

import ctypes
import dataclasses
import pickle

import torch

from eagerc.aten_meta import storage_extent

# The most bytes a described call's tensors may hold (their storage extents, summed).
STANDIN_BYTES_LIMIT = 256 << 20


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """A tensor by what a signature reads of it."""

    size: tuple
    stride: tuple
    storage_offset: int
    dtype: torch.dtype
    device: str

    @classmethod
    def of(cls, t: torch.Tensor, device: str | None = None) -> "TensorMeta":
        return cls(tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype,
                   device or str(t.device))

    def standin_bytes(self) -> int:
        return max(storage_extent(self.size, self.stride, self.storage_offset), 1) * self.dtype.itemsize

    def standin(self) -> torch.Tensor:
        """Zero bytes with this metadata, made without dispatching an op eagerc serves
        (empty and a view are the device runtime's; the bytes are zeroed without an op).
        Allocated by torch's allocator, so its alignment is what the caller's was."""
        raw = torch.empty(self.standin_bytes(), dtype=torch.uint8)
        ctypes.memset(raw.data_ptr(), 0, raw.numel())
        base = raw.view(self.dtype)
        if self.device != "cpu":
            base = base.to(self.device)
        return base.as_strided(self.size, self.stride, self.storage_offset)


@dataclasses.dataclass(frozen=True)
class CallDescription:
    """One miss: enough for another process to compile its kernel."""

    op: str               # "aten::add.Tensor"
    device: str           # the served device: "cpu" (override mode), "eagerc", a vendor's
    args: tuple           # the schema's arguments in order, tensors as TensorMeta
    parallel: bool        # the size class (a parallel kernel, or a single-threaded one)
    signature: bytes      # the caller's signature bytes: what the worker checks it stored
    specialized: bool     # the caller's op has scalar values in its keys
    known_variants: tuple  # the key's kernels the caller holds already, whose guards refused it
    served_ops: tuple = ()  # override mode: the ops to enable for the replay (this one)

    def standin_bytes(self) -> int:
        """What the replay's stand-ins hold, in bytes."""
        def total(value):
            if isinstance(value, TensorMeta):
                return value.standin_bytes()
            if isinstance(value, (list, tuple)):
                return sum(total(v) for v in value)
            return 0

        return total(self.args)

    def to_bytes(self) -> bytes | None:
        """The pickled description; None when an argument does not pickle."""
        try:
            return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None


def describe(op_name: str, args, parallel: bool, signature: bytes, specialized: bool,
             known_variants, target) -> CallDescription | None:
    """The description of a miss, or None when an argument has no description (an object
    the replay cannot rebuild): that miss compiles in the caller's process."""
    # On a device whose memory has a home, a kernel that calls the home's ATen functions
    # misses again on aliases of the home: the arguments are then all home tensors, and
    # the replay must start from the device's own tensors to take that path too.
    device_tensors = [t for t in _tensors(args) if t.device.type == target.device]
    on_aliases = target.host_aliases and target.new_device and not device_tensors
    home = target.home if target.host_aliases else None

    def meta(value):
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided or value.is_quantized or value.is_nested:
                raise _NoDescription
            device = f"{target.device}:{value.device.index or 0}" if (
                on_aliases and value.device.type == home) else None
            return TensorMeta.of(value, device)
        if isinstance(value, (list, tuple)):
            return type(value)(meta(v) for v in value)
        if isinstance(value, (torch.Generator, torch.UntypedStorage, torch.TypedStorage)):
            raise _NoDescription
        return value

    try:
        described = CallDescription(op_name, target.device, tuple(meta(a) for a in args), parallel,
                                    bytes(signature), specialized, tuple(sorted(known_variants)),
                                    () if target.new_device else (op_name,))
    except _NoDescription:
        return None
    return described if described.standin_bytes() <= STANDIN_BYTES_LIMIT else None


class _NoDescription(Exception):
    pass


def _tensors(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def standin_args(call: CallDescription) -> tuple:
    def build(value):
        if isinstance(value, TensorMeta):
            return value.standin()
        if isinstance(value, (list, tuple)):
            return type(value)(build(v) for v in value)
        return value

    return tuple(build(a) for a in call.args)


def split_by_schema(op, args) -> tuple:
    """(positional, keyword) as the op's schema takes them."""
    positional, keywords = [], {}
    for argument, value in zip(op._schema.arguments, args):
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            positional.append(value)
    return positional, keywords
