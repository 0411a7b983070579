"""One edit shared by the rewrites of a generated C++ wrapper: calls to functions are
pointed at eagerc's replacements, whose definitions go right after the wrapper's header."""
from __future__ import annotations


def after_header(code: str) -> int:
    """Where code may be inserted: after the wrapper's first include (Inductor's
    cpp_wrapper header; the GPU wrapper starts with a blank line)."""
    include = code.find("#include")
    return 0 if include < 0 else code.index("\n", include) + 1


def redirect_calls(code: str, calls: dict, definitions: str) -> str:
    """`code` with each call in `calls` (old "f(" -> new "g(") renamed after the header,
    and `definitions` inserted there; unchanged when the body makes none of the calls."""
    start = after_header(code)
    body = code[start:]
    if not any(old in body for old in calls):
        return code
    for old, new in calls.items():
        body = body.replace(old, new)
    return code[:start] + definitions + body
