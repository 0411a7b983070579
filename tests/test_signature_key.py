"""The signature's key bytes (csrc/signature.cpp) for known calls.

Disk cache entries are found by these bytes: a change in how the key is written must not
change what is written, or every cached kernel misses. The resolver is wrapped to see
the key of each miss.
"""
from __future__ import annotations

import struct

import torch

import eagerc

FLOAT32, CPU, NO_INDEX = 6, 0, 0xFF


def _tensor_bytes(sizes, strides) -> bytes:
    def size_class(v):
        return 0 if v == 0 else (1 if v == 1 else 2)

    dims = bytes(size_class(s) | (size_class(st) << 2) for s, st in zip(sizes, strides))
    return b"T" + bytes([FLOAT32, CPU, NO_INDEX, len(sizes)]) + dims + b"CA"


def _int(v: int) -> bytes:
    return struct.pack("<q", v)


def test_a_unary_call(miss_keys):
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(2, 3))
    assert ("aten::abs", _tensor_bytes((2, 3), (3, 1)) + b"S") in miss_keys


def test_an_int_list_and_a_bool(miss_keys):
    with eagerc.enabled("cpu", ops=["aten::sum.dim_IntList"]):
        torch.sum(torch.randn(4, 5), dim=[1], keepdim=True)
    expected = (_tensor_bytes((4, 5), (5, 1)) + b"L" + _int(1) + _int(1) + b"b\x01" + b"n" + b"S")
    assert ("aten::sum.dim_IntList", expected) in miss_keys


def test_a_key_longer_than_the_first_buffer(miss_keys):
    tensors = [torch.randn(3, 2) for _ in range(20)]  # 10 bytes each: over 128 in all
    with eagerc.enabled("cpu", ops=["aten::cat"]):
        got = torch.cat(tensors, 1)
    assert torch.equal(got, torch.cat(tensors, 1))
    expected = b"[" + _int(20) + _tensor_bytes((3, 2), (2, 1)) * 20 + b"i" + _int(1) + b"S"
    assert ("aten::cat", expected) in miss_keys
