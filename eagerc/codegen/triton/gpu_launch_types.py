"""Fix the C++ type of float scalars passed to Triton kernels in Inductor's GPU wrapper.

Inductor's JIT C++ wrapper (torch 2.11) declares every symbolic kernel argument of its
``call_triton_*`` launchers as ``int64_t``, also one the Triton kernel takes as ``fp64``
(a lifted float scalar such as add's alpha). The launcher then copies it into the right
``double`` slot, but the value has already been truncated at the call: alpha=0.5 became
0 (found on the H100, docs/benchmarks.md). The launcher's own body says which parameters
are doubles (``double var_N = name;``); this module gives those parameters that type.
"""
from __future__ import annotations

import re

_LAUNCHER = re.compile(r"static inline void call_(?P<name>\w+)\((?P<params>[^)]*)\)\s*\{")
_DOUBLE_ARG = re.compile(r"\bdouble\s+var_\d+\s*=\s*(?P<param>\w+)\s*;")


def fix_float_launch_params(code: str) -> str:
    """Give each ``call_triton_*`` launcher's float parameters the type ``double``."""
    pieces, last = [], 0
    launchers = list(_LAUNCHER.finditer(code))
    for i, match in enumerate(launchers):
        body_end = launchers[i + 1].start() if i + 1 < len(launchers) else len(code)
        doubles = {m.group("param") for m in _DOUBLE_ARG.finditer(code, match.end(), body_end)}
        params = match.group("params")
        for param in doubles:
            params = re.sub(rf"\bint64_t(\s+{param}\b)", r"double\1", params)
        pieces.append(code[last:match.start("params")])
        pieces.append(params)
        last = match.end("params")
    pieces.append(code[last:])
    return "".join(pieces)
