"""A C++ wrapper's stolen input handles in a fixed array instead of a std::vector.

Inductor's JIT wrapper starts with ``auto inputs =
steal_from_raw_handles_to_raii_handles(input_handles, N);``: a std::vector of RAII handles,
whose growth, moves and destruction every wrapper instantiates and compiles (0.034 s of
clang's 0.23 s for an abs kernel on the 2-core dev machine) and every call allocates. The
wrapper only indexes it (``std::move(inputs[i])``, ``inputs[i]`` as a handle), which an
array of the same RAII handles does the same way; each handle is still deleted when its
owner goes out of scope. The caller's handle array is left as it is: eagerc's caller
(csrc/artifact.cpp, Artifact::run) drops it after the call and never reads it again.
A wrapper that uses the vector as a vector (``inputs.clear()``: AOTInductor's) is left as
it is.
"""
from __future__ import annotations

import re

_STEAL = re.compile(r"auto inputs = steal_from_raw_handles_to_raii_handles\(input_handles, (\d+)\);")


def inputs_as_array(code: str) -> str:
    """`code` (a generated C++ wrapper) with its stolen inputs in an array."""
    if "inputs." in code:
        return code

    def array(match) -> str:
        n = int(match.group(1))
        if n == 0:
            return match.group(0)
        handles = ", ".join(f"RAIIAtenTensorHandle(input_handles[{i}])" for i in range(n))
        return f"RAIIAtenTensorHandle inputs[{n}] = {{{handles}}};"

    return _STEAL.sub(array, code)
