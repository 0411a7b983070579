"""Give int lists that Inductor's C++ wrapper passes to boxed ATen calls their IntList tag.

An op Inductor has no C shim for is called through the dispatcher from the generated
wrapper: arguments are pushed as IValues and the op is called boxed. Inductor (torch 2.11
to 2.13) builds an ``int[]`` / ``SymInt[]`` argument as a ``c10::impl::GenericList`` of
SymInt IValues; the unboxing of a CPU kernel then asserts "Expected IntList but got
GenericList" (seen with ``upsample_bilinear2d``'s ``output_size``). This module rewrites
the push of such a list into an ``IValue`` holding a ``c10::List<int64_t>``.
"""
from __future__ import annotations

import re

_DECLARED = re.compile(r"c10::impl::GenericList\s+(?P<name>\w+)\(c10::(?:Sym)?IntType::get\(\)\);")
_HELPER_NAME = "eagerc_int_list_ivalue"
_HELPER = f"""
// eagerc: an int[] argument as the dispatcher's boxed kernels expect it (an IntList).
static inline c10::IValue {_HELPER_NAME}(const c10::impl::GenericList& items) {{
  c10::List<int64_t> out;
  out.reserve(items.size());
  for (const c10::IValue& v : items) out.push_back(v.isSymInt() ? v.toSymInt().expect_int() : v.toInt());
  return c10::IValue(std::move(out));
}}
"""


def fix_boxed_int_lists(code: str) -> str:
    """Push every int list the wrapper declares as a GenericList as an IntList instead."""
    names = [m.group("name") for m in _DECLARED.finditer(code)]
    if not names:
        return code
    for name in names:
        code = code.replace(f"c10::IValue(std::move({name}))", f"{_HELPER_NAME}({name})")
    # Before the first function of the wrapper: after its includes.
    first = code.index("\nvoid ") if "\nvoid " in code else 0
    return code[:first] + _HELPER + code[first:]
