"""Text for people: the CLI's tables, sizes, ages, and what a signature means.

Columns are as wide as their widest cell, so no name is ever cut.

    >>> print_table(["op", "entries"], [["aten::add.Tensor", 3], ["aten::abs", 12]])
    op                entries
    aten::add.Tensor        3
    aten::abs              12
    >>> human_bytes(102400), human_age(None)
    ('100 KiB', '-')
"""
from __future__ import annotations

import time


def print_table(header: list[str], rows: list[list], indent: str = "") -> None:
    """Text left-aligned, numbers right-aligned, each column as wide as its widest cell."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) and bool(rows)
               for i in range(len(header))]
    for row in cells:
        line = "  ".join(cell.rjust(width) if right else cell.ljust(width)
                         for cell, width, right in zip(row, widths, numeric))
        print(indent + line.rstrip())


def human_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.0f} GiB"


def human_age(added: float | None, now: float | None = None) -> str:
    """How long ago ``added`` (a time.time()) was: '42 s', '5 min', '3 h', '12 d'."""
    if added is None:
        return "-"
    seconds = max(0.0, (now or time.time()) - added)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def describe_signature(key: bytes, metadata: dict) -> str:
    """What a cache entry is for, in words: the argument types of an op kernel
    (``float32[s,s] C, other=int``), a graph's size, or why the key has no kernel.

        >>> describe_signature(b"op", {"op": "aten::abs", "signature": "aten::abs(float32[s] C)"})
        'float32[s] C'
        >>> describe_signature(b"op", {"op": "aten::nonzero", "fallback": "data-dependent"})
        'no kernel: data-dependent'
    """
    if "fallback" in metadata:
        return f"no kernel: {metadata['fallback'].splitlines()[0][:100] if metadata['fallback'] else ''}"
    if metadata.get("needs_host_aliases"):
        return "no kernel: runs on host aliases (calls ATen CPU functions)"
    text = metadata.get("signature")
    if not text:
        from kernel_cache.records import describe_key

        return describe_key(key)
    op = metadata.get("op")
    if op and text.startswith(op + "(") and text.endswith(")"):
        return text[len(op) + 1:-1]
    return text
