"""Guards of a compiled kernel, as C++ compiled into the kernel's own library.

Tracing with symbolic sizes assumes things (two sizes are equal because they broadcast,
a row fits one reduction strategy, a stride equals the next size). Each assumption is a
sympy expression over the call's size, stride, offset and scalar symbols. The holder
fills two arrays per call (``ints``, ``floats``); which slot holds what is C++'s layout
(csrc/runtime_layout.h), read here through ``eagerc._C.RuntimeSlot``.
``eagerc_guard(ints, floats)`` is 1 when every assumption holds for that call.
"""
from __future__ import annotations

import sympy
import torch

from torch.utils._sympy.functions import (
    CeilDiv,
    CleanDiv,
    FloorDiv,
    FloatTrueDiv,
    IntTrueDiv,
    Max,
    Min,
    Mod,
    ModularIndexing,
    PythonMod,
    ToFloat,
    TruncToInt,
)


from eagerc.refusals import CompileError


class GuardError(CompileError):
    """An assumption eagerc cannot express as a C++ guard (the op falls back)."""


def _c(e) -> str:
    if isinstance(e, bool) or e is sympy.true or e is sympy.false:
        return "1" if bool(e) else "0"
    if isinstance(e, int):
        return f"int64_t({e}LL)"
    if isinstance(e, float):
        return repr(e)
    if isinstance(e, sympy.Symbol):
        return e.name
    if isinstance(e, sympy.Integer):
        return f"int64_t({int(e)}LL)"
    if isinstance(e, (sympy.Float, sympy.Rational)):
        return repr(float(e))
    if e is sympy.oo:
        return "INFINITY"
    if e is sympy.S.NegativeInfinity:
        return "(-INFINITY)"
    a = [_c(x) for x in e.args]
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(a) + ")"
    if isinstance(e, sympy.Mul):
        return "(" + " * ".join(a) + ")"
    if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer) and int(e.args[1]) >= 0:
        return "(" + " * ".join([a[0]] * int(e.args[1])) + ")" if int(e.args[1]) else "1"
    rel = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    for cls, op in rel.items():
        if isinstance(e, cls):
            return f"({a[0]} {op} {a[1]})"
    if isinstance(e, sympy.And):
        return "(" + " && ".join(a) + ")"
    if isinstance(e, sympy.Or):
        return "(" + " || ".join(a) + ")"
    if isinstance(e, sympy.Not):
        return f"(!{a[0]})"
    if isinstance(e, (FloorDiv, CleanDiv)):
        return f"eagerc_floordiv({a[0]}, {a[1]})"
    if isinstance(e, CeilDiv):
        return f"(-eagerc_floordiv(-({a[0]}), {a[1]}))"
    if isinstance(e, (PythonMod, Mod, sympy.Mod)):  # sympy.Mod: the sign of the divisor, as Python
        return f"eagerc_mod({a[0]}, {a[1]})"
    if isinstance(e, ModularIndexing):
        return f"eagerc_mod(eagerc_floordiv({a[0]}, {a[1]}), {a[2]})"
    if isinstance(e, (Max, sympy.Max)):
        out = a[0]
        for x in a[1:]:
            out = f"std::max<double>({out}, {x})"
        return out
    if isinstance(e, (Min, sympy.Min)):
        out = a[0]
        for x in a[1:]:
            out = f"std::min<double>({out}, {x})"
        return out
    if isinstance(e, (IntTrueDiv, FloatTrueDiv)):
        return f"(double({a[0]}) / double({a[1]}))"
    if isinstance(e, ToFloat):
        return f"double({a[0]})"
    if isinstance(e, TruncToInt):
        return f"int64_t({a[0]})"
    raise GuardError(f"cannot express guard term {type(e).__name__}: {e}")


_PRELUDE = """
#include <algorithm>
#include <cmath>
#include <cstdint>
static inline int64_t eagerc_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t eagerc_mod(int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""


def _compares_with_a_constant(check) -> bool:
    """``I[k] == 64`` or ``s3 == 64``: one load and one comparison."""
    if isinstance(check, tuple):
        return isinstance(check[1], (int, sympy.Integer))
    return (isinstance(check, sympy.Eq) and any(isinstance(a, sympy.Integer) for a in check.args)
            and any(isinstance(a, sympy.Symbol) for a in check.args))


def guard_source(bindings: dict, checks: list) -> str:
    """C++ for ``eagerc_guard``.

    bindings: symbol name -> ("i", index) or ("f", index) into the guard arrays.
    checks: sympy booleans, or (index, expr) pairs meaning ``ints[index] == expr``.

    Comparisons with a constant come first, the others keep their order: an op's variants
    under one key differ mostly in a specialized size (ResNet-50's 1x1 convolutions: one
    kernel per weight shape), and the holder tries them in turn, so a variant that does
    not apply should fail at its first terms. A launch plan interprets its guard
    (launch_plan.py), where a full evaluation of a convolution's 40 terms costs about a
    microsecond. The terms are pure, so their order changes no answer; the others keep
    their order, so a term that divides still comes after the range check before it.
    """
    checks = sorted(checks, key=lambda c: not _compares_with_a_constant(c))  # stable
    lines = [_PRELUDE, 'extern "C" int eagerc_guard(const int64_t* I, const double* F) {']
    for name, (arr, idx) in sorted(bindings.items()):
        ctype = "int64_t" if arr == "i" else "double"
        lines.append(f"  const {ctype} {name} = {arr.upper()}[{idx}];")
        lines.append(f"  (void){name};")
    for check in checks:
        if isinstance(check, tuple):
            idx, expr = check
            cond = f"(I[{idx}] == {_c(expr)})"
        else:
            if check is sympy.true or check is True:
                continue
            cond = _c(check)
        lines.append(f"  if (!{cond}) return 0;")
    lines.append("  return 1;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def bind_symbols(inputs) -> tuple[dict, list]:
    """Bind each symbol to the first guard slot holding it; every other size, stride and
    offset must equal its symbolic expression (a check of the guard).

    ``inputs``: (RuntimeSlot, fake value) pairs, the fake a tensor or a SymInt (int
    scalars); float scalars bind nothing (they are read inside the graph). Returns
    (bindings: symbol name -> ("i"|"f", slot), checks: (slot, expr) pairs).
    """
    bindings, checks = {}, []

    def visit(slot, value, arr="i", check=True):
        expr = value.node.expr if isinstance(value, (torch.SymInt, torch.SymFloat)) else value
        if isinstance(expr, sympy.Symbol) and expr.name not in bindings:
            bindings[expr.name] = (arr, slot)
        elif arr == "i" and check:
            checks.append((slot, sympy.sympify(expr)))

    for slot, fake in inputs:
        if slot.kind == "tensor":
            for index, value in zip(slot.size_slots, fake.shape):
                visit(index, value)
            # The stride of a dim of size 1 addresses nothing: a [1, n] row sliced from a
            # [1, 512] buffer (stride 512) is the same call as a fresh [1, n] (stride n).
            # Fakes of both infer stride n, so checking it refused the very call that a
            # kernel was compiled from (BERT's position ids, on GPU memory).
            for index, value, size in zip(slot.stride_slots, fake.stride(), fake.shape):
                visit(index, value, check=not (isinstance(size, int) and size == 1))
            visit(slot.offset_slot, fake.storage_offset())
        elif slot.kind == "int":
            visit(slot.value_slot, fake)
    return bindings, checks


def range_checks(shape_env, bindings) -> list:
    """The value ranges the ShapeEnv assumed for bound symbols (a symbolic size is >= 2:
    sizes 0 and 1 are specialized), as guard terms."""
    from torch.utils._sympy.numbers import int_oo

    unbounded = (int_oo, -int_oo, sympy.oo, -sympy.oo)
    checks = []
    for sym, vr in shape_env.var_to_range.items():
        if sym.name not in bindings:
            continue
        if vr.lower not in unbounded:
            checks.append(sympy.Ge(sym, vr.lower))
        if vr.upper not in unbounded:
            checks.append(sympy.Le(sym, vr.upper))
    return checks
