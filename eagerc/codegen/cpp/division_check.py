"""A CPU kernel's integer-division check dropped where nothing in the kernel can set it.

Every Inductor CPU kernel ends with ``inductor_cpu_throw_if_integer_div_error(err);``, which
raises when the kernel's integer floor division, modulo or remainder met a zero divisor:
cpp_prefix.h's helpers note that in the atomic the kernel points
``inductor_cpu_integer_div_error_flag`` at. The check instantiates TORCH_CHECK's message
formatting (std::ostringstream and friends), which clang compiles in every kernel: 0.04 s
of the 0.2 s an abs kernel's unit takes (2-core dev machine). A kernel that calls none of
the helpers that note a zero divisor, directly or through other helpers of the header,
can never raise it: there the check is dead code and is removed from the source. The
helpers are read from the header itself (:func:`noting_names`), so a torch whose header
adds one is followed; a kernel that names any of them, even in a comment, keeps its check.
"""
from __future__ import annotations

import functools
import re

_CHECK = re.compile(r"^[ \t]*inductor_cpu_throw_if_integer_div_error\(\w+\);[ \t]*\n", re.M)
_NOTE = "inductor_cpu_note_integer_div_by_zero"
_FLAG = "inductor_cpu_integer_div_error_flag"
_FIRST_CALL = re.compile(r"\b(\w+)\s*\(")


def _owner(lines: list, at: int):
    """Name of the function whose body holds line `at` of a header written as cpp_prefix.h
    is (each top-level definition ends with a "}" at a line's start): the first name called
    in the first line after the previous such "}" that calls one and is not a comment, a
    preprocessor line or a template head; None where there is none."""
    k = at
    while k > 0 and not lines[k - 1].startswith("}"):
        k -= 1
    for line in lines[k:at + 1]:
        text = line.strip()
        if not text or text.startswith(("#", "//", "/*", "*", "template")):
            continue
        found = _FIRST_CALL.search(text)
        if found:
            return found.group(1)
    return None


@functools.lru_cache(maxsize=4)
def noting_names(header_text: str) -> frozenset:
    """Names of the functions of `header_text` that note a zero divisor (call _NOTE),
    directly or through another such function (transitively), with _NOTE and _FLAG."""
    lines = header_text.splitlines()
    names, todo = {_NOTE}, [_NOTE]
    while todo:
        called = re.compile(rf"\b{re.escape(todo.pop())}\s*\(")
        for i, line in enumerate(lines):
            if called.search(line):
                owner = None if line.lstrip().startswith("#") else _owner(lines, i)
                if owner is None:  # a macro, or no function around the call
                    return frozenset()  # cannot tell: without_dead_check keeps every check
                if owner not in names:
                    names.add(owner)
                    todo.append(owner)
    return frozenset(names | {_FLAG})


def without_dead_check(kernel_code: str, header_text: str) -> str:
    """`kernel_code` without its integer-division checks where none can fire: it names
    none of `header_text`'s noting functions (header_text: cpp_prefix.h's text)."""
    names = noting_names(header_text) if _NOTE in header_text else frozenset()
    body = _CHECK.sub("", kernel_code)
    if not names or any(re.search(rf"\b{re.escape(n)}\b", body) for n in names - {_FLAG}):
        return kernel_code
    return body
