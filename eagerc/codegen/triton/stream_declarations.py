"""Drop a GPU wrapper's repeated stream declaration in a scope that already has it.

Inductor's JIT C++ wrapper for CUDA declares ``cudaStream_t streamN;`` before the first
kernel launch of each (sub)graph it writes, then fetches the current stream into it. The
subgraphs of a ``while_loop`` (its condition and its body) are written into the same
``while (1) { ... }`` block, so the body's declaration repeats the condition's, and the
wrapper does not compile (torch 2.11: "redeclaration of 'CUstream_st* stream0'"; seen with
the Hermite, Laguerre and Legendre recurrences). Where the name is already declared in an
enclosing open block, the repeat becomes the fetch alone: the same variable, the same
current stream.
"""
from __future__ import annotations

import re

_DECLARATION = re.compile(r"^\s*(?:cudaStream_t|hipStream_t)\s+(?P<name>stream\d+);\s*$")
# Braces of code lines; wrappers carry no braces inside string or character literals on the
# lines that matter here, and a comment's are skipped.
_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|//.*$')


def drop_repeated_stream_declarations(code: str) -> str:
    """`code` without any stream declaration that an enclosing open block already made."""
    if code.count("Stream_t stream") < 2:
        return code
    lines = code.split("\n")
    kept = []
    open_blocks = [set()]  # the names declared in each open block, outermost first
    for line in lines:
        declared = _DECLARATION.match(line)
        if declared and any(declared.group("name") in names for names in open_blocks):
            continue
        if declared:
            open_blocks[-1].add(declared.group("name"))
        kept.append(line)
        code_only = _LITERAL_OR_COMMENT.sub("", line)
        for brace in re.findall(r"[{}]", code_only):
            if brace == "{":
                open_blocks.append(set())
            elif len(open_blocks) > 1:
                open_blocks.pop()
    return "\n".join(kept)
