"""C++ arithmetic of generated wrappers and guards -> typed postfix programs for the plan
launcher (plan_launcher/).

A GPU wrapper computes sizes, strides, grids and kernel arguments with plain C++ integer
expressions (``s50*s60``, ``((xnumel + (256 - 1)) / (256))``), and eagerc's guard
(guard_source.py) with comparisons, ``eagerc_floordiv``/``eagerc_mod``, ``std::max<double>`` and
casts (Inductor's printer also writes ``c10::div_floor_integer`` and ``static_cast``). This module parses exactly that subset, with C++'s types and conversions (int64_t and
double; a mixed operation is a double one), and writes it as one token: postfix operations
joined by commas, e.g. ``r:0,r:1,*i``. Anything outside the subset raises Unsupported, and
the wrapper is built with g++ as before.
"""
from __future__ import annotations

import re


class Unsupported(ValueError):
    """C++ this module does not translate (the caller compiles the wrapper instead)."""


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+(?:LL|L)?)"
                    r"|(?P<name>std::max<double>|std::min<double>|std::max|std::min|c10::div_floor_integer"
                    r"|static_cast<int64_t>|static_cast<double>|[A-Za-z_]\w*)"
                    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!()\[\],]))")

# Binary operators by precedence, loosest first (C++'s order).
_LEVELS = (("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%"))
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}


def _tokens(text: str) -> list:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise Unsupported(f"cannot read {text[pos:pos + 20]!r} in {text!r}")
        out.append(match.group("num") or match.group("name") or match.group("op"))
        pos = match.end()
    return out


class Compiler:
    """Compiles expressions against `names`: identifier -> (postfix op, type 'i' or 'd'),
    and `arrays`: identifier -> function(index) -> (op, type), for ``I[3]``, ``x_size[1]``."""

    def __init__(self, names: dict, arrays: dict | None = None):
        self.names = names
        self.arrays = arrays or {}

    def compile(self, text: str, want: str | None = None) -> str:
        """`text` as one postfix token; with `want` ('i' or 'd'), converted to that type as a
        C++ initialization would."""
        self._toks, self._pos = _tokens(text), 0
        code, kind = self._binary(0)
        if self._pos != len(self._toks):
            raise Unsupported(f"unexpected {self._toks[self._pos]!r} in {text!r}")
        if want is not None:
            code, kind = _convert(code, kind, want), want
        return ",".join(code)

    def type_of(self, text: str) -> str:
        self._toks, self._pos = _tokens(text), 0
        return self._binary(0)[1]

    # Recursive descent over _LEVELS; each returns (ops, type).
    def _peek(self):
        return self._toks[self._pos] if self._pos < len(self._toks) else None

    def _take(self, expected=None):
        tok = self._peek()
        if tok is None or (expected is not None and tok != expected):
            raise Unsupported(f"expected {expected!r}, found {tok!r}")
        self._pos += 1
        return tok

    def _binary(self, level: int):
        if level == len(_LEVELS):
            return self._unary()
        left, lk = self._binary(level + 1)
        while self._peek() in _LEVELS[level]:
            op = self._take()
            right, rk = self._binary(level + 1)
            left, lk = _combine(op, left, lk, right, rk)
        return left, lk

    def _unary(self):
        tok = self._peek()
        if tok in ("-", "+", "!"):
            self._take()
            code, kind = self._unary()
            if tok == "-":
                return code + ["neg" + kind], kind
            if tok == "!":
                return _truth(code, kind) + ["!"], "i"
            return code, kind
        return self._primary()

    def _primary(self):
        tok = self._take()
        if tok == "(":
            result = self._binary(0)
            self._take(")")
            return result
        if tok[0].isdigit():
            if re.fullmatch(r"\d+(?:LL|L)?", tok):
                value = int(tok.rstrip("L"))
                if value >= 2 ** 63:
                    raise Unsupported(f"integer literal out of range: {tok}")
                return [f"ci:{value}"], "i"
            return [f"cd:{float(tok).hex()}"], "d"
        if tok == "INFINITY":
            return [f"cd:{float('inf').hex()}"], "d"
        if tok in ("int64_t", "double", "static_cast<int64_t>", "static_cast<double>") and self._peek() == "(":
            code, kind = self._call_args(1)[0]  # a cast
            want = "i" if "int64_t" in tok else "d"
            return _convert(code, kind, want), want
        if tok == "c10::div_floor_integer":  # Inductor's C++ printer; floor division as eagerc_floordiv
            tok = "eagerc_floordiv"
        if tok in ("eagerc_floordiv", "eagerc_mod"):
            (a, ak), (b, bk) = self._call_args(2)
            return _convert(a, ak, "i") + _convert(b, bk, "i") + ["fd" if tok == "eagerc_floordiv" else "pm"], "i"
        if tok.startswith(("std::max", "std::min")):
            (a, ak), (b, bk) = self._call_args(2)
            kind = "d" if tok.endswith("<double>") else ("d" if "d" in (ak, bk) else "i")
            if not tok.endswith("<double>") and ak != bk:
                raise Unsupported("std::max/min of mixed types")  # a compile error in C++
            return _convert(a, ak, kind) + _convert(b, bk, kind) + [tok[5:8] + kind], kind
        if tok in self.arrays and self._peek() == "[":
            self._take("[")
            index = self._take()
            self._take("]")
            if not re.fullmatch(r"\d+(?:LL|L)?", index):
                raise Unsupported(f"a non-constant index: {tok}[{index}]")
            op, kind = self.arrays[tok](int(index.rstrip("L")))
            return [op], kind
        if tok in self.names:
            op, kind = self.names[tok]
            return [op], kind
        raise Unsupported(f"unknown name {tok!r}")

    def _call_args(self, count: int):
        self._take("(")
        args = [self._binary(0)]
        while len(args) < count:
            self._take(",")
            args.append(self._binary(0))
        self._take(")")
        return args


def _convert(code: list, kind: str, want: str) -> list:
    if kind == want:
        return code
    return code + ["i2d" if want == "d" else "d2i"]


def _truth(code: list, kind: str) -> list:
    return code if kind == "i" else code + ["d2b"]


def _combine(op, left, lk, right, rk):
    if op in ("&&", "||"):
        return _truth(left, lk) + _truth(right, rk) + [op], "i"
    if op == "%" and "d" in (lk, rk):
        raise Unsupported("% of a double")  # a compile error in C++
    kind = "d" if "d" in (lk, rk) else "i"
    code = _convert(left, lk, kind) + _convert(right, rk, kind) + [op + kind]
    return code, "i" if op in _COMPARISONS else kind
