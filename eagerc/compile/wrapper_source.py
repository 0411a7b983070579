"""One edit shared by the rewrites of a generated C++ wrapper: calls to a function are
pointed at eagerc's replacement, whose definition goes right after the wrapper's header."""
from __future__ import annotations


def redirect_calls(code: str, after_header: int, old_call: str, new_call: str,
                   definition: str) -> str:
    """`code` with `old_call` (e.g. "f(") renamed to `new_call` after the header and
    `definition` inserted there; unchanged when the body never makes the call."""
    body = code[after_header:]
    if old_call not in body:
        return code
    return code[:after_header] + definition + body.replace(old_call, new_call)
