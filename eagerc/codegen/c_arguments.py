"""Reading the C++ that Inductor's wrappers write: a call's argument list, split into its
arguments. Shared by the code generators that turn simple wrappers into something cheaper
(triton/launch_plan.py's plans, cpp/kernel_plan.py's plain entries)."""
from __future__ import annotations


def split_arguments(text: str) -> list:
    """`text` split at its top-level commas (not those inside a call's parentheses or an
    initializer's braces: ``c10::div_floor_integer(a, b)`` is one value), each stripped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]
