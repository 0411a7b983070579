"""Inductor's C++ kernels ask how an index moves along a loop variable (``stride_at_vec_range``:
which loop to vectorize, whether a load is contiguous, a transposed load's stride); this
answers the plain cases without sympy's ``simplify``.

Why: ``stride_at_vec_range`` simplifies the index and then the difference of the index at
``var + 1`` and at ``var``, each with ``sympy.simplify``, which tries a dozen rewrites
(cancel, together, factor_terms, hyperexpand, ...) even for ``d0*s60 + d1``: 20-40 ms a
call, 4-8 calls per reduction kernel (measured on the 2-core dev machine: ~0.17 s of the
~0.2 s of Python in a cold ``x.sum(1)``), and the first call of a process imports
sympy.physics (~0.1 s) for simplify's unit handling.

What does not change: only an index built of symbols and integers by sums, products and
positive integer powers (no FloorDiv, ModularIndexing or other function: there
``simplify_index_in_vec_range`` rewrites the index and Inductor's own path runs) is
answered here, and only where the difference, expanded, is a monomial (an integer, a
symbol, or a product of them). For a polynomial the expanded difference is exact, and a
monomial has one canonical sympy form, which is what ``simplify`` returns for an
expression equal to it; the generated code is the same text (tests/test_one_unit.py
compares it with and without this module).
"""
from __future__ import annotations

import contextlib
import functools


def _polynomial(expr) -> bool:
    import sympy

    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow):
            if not (node.exp.is_Integer and node.exp > 0):
                return False
        elif not isinstance(node, (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul)):
            return False
    return True


def _monomial(expr) -> bool:
    import sympy

    factors = expr.args if isinstance(expr, sympy.Mul) else (expr,)
    return all(isinstance(f, (sympy.Integer, sympy.Symbol)) or
               (isinstance(f, sympy.Pow) and isinstance(f.base, sympy.Symbol) and f.exp.is_Integer and f.exp > 0)
               for f in factors)


@functools.lru_cache(maxsize=4096)
def fast_stride(index, var):
    """How `index` changes when `var` grows by one, where `index` is a polynomial and the
    change a monomial; None otherwise (the caller asks Inductor)."""
    import sympy

    if not isinstance(index, sympy.Expr) or not _polynomial(index):
        return None
    stride = sympy.expand(index.xreplace({var: var + 1}) - index)
    return stride if _monomial(stride) else None


@contextlib.contextmanager
def fast_vector_strides():
    """While active, Inductor's C++ code generator answers polynomial strides with
    :func:`fast_stride` (and Inductor's ``stride_at_vec_range`` for the rest)."""
    try:
        from torch._inductor.codegen import cpp
    except ImportError:
        yield
        return
    original = getattr(cpp, "stride_at_vec_range", None)
    if original is None:
        yield
        return

    def stride_at_vec_range(index, var, vec_length=None):
        stride = fast_stride(index, var)
        return original(index, var, vec_length) if stride is None else stride

    cpp.stride_at_vec_range = stride_at_vec_range
    try:
        yield
    finally:
        cpp.stride_at_vec_range = original
