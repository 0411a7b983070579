"""The extern calls a launch plan may make, and how a wrapper's call of one becomes a plan
step (launch_plan.py reads the rest of the wrapper).

A call's arguments are handles (the wrapper's tensors: plan slots), expressions, int
arrays (a literal of the call or a named array) and, for an op that makes its result
(convolution), the handle it returns, which fills a new slot.
"""
from __future__ import annotations

import re

from eagerc.codegen.c_arguments import split_arguments
from eagerc.codegen.triton.cexpr import Unsupported

NAME = r"[A-Za-z_]\w*"  # a C++ identifier (launch_plan.py reads them too)

# The extern calls a plan may make (cuBLAS's and cuDNN's ops through AOTI's CUDA shims,
# declared in plan_launcher/abi.h as in torch's c_shim_cuda.h): each argument's kind, h a
# tensor handle, i an int64_t, b an int32_t, d a double, o an optional tensor (a pointer to
# a handle, or nullptr), a an int array (its pointer and its length: two C arguments), r
# the handle the call returns (a new tensor). Others (attention: several returned handles)
# are compiled as before.
EXTERNS = {"aoti_torch_cuda_mm_out": "hhh", "aoti_torch_cuda_bmm_out": "hhh",
           "aoti_torch_cuda_addmm_out": "hhhhdd", "aoti_torch_cuda_baddbmm_out": "hhhhdd",
           "aoti_torch_cuda_convolution": "hhoaaabair"}
# A temporary int array as Inductor passes one (cpp_wrapper_cpu's _generate_temporary_array_pointer).
_ARRAY_LITERAL = re.compile(r"std::array<int64_t, (\d+)>\{([^{}]*)\}\.cbegin\(\)")


def extern_step(body, name: str, call: str) -> str:
    """The plan step of a call of extern `name` with the argument text `call`, reading and
    updating `body` (launch_plan's _Body: its tensors' slots, expressions, named arrays,
    and the handles pending a returned tensor). Raises Unsupported where an argument is
    not of a form the plan can say."""
    literals = {}

    def named(m) -> str:  # an array literal's commas are not the call's
        literals[f"eagerc_array_{len(literals)}"] = (int(m.group(1)), m.group(2))
        return f"eagerc_array_{len(literals) - 1}"

    call_args = split_arguments(_ARRAY_LITERAL.sub(named, call))
    kinds = EXTERNS[name]
    if len(call_args) != len(kinds) + kinds.count("a"):
        raise Unsupported(f"call of {name} with {len(call_args)} arguments")
    args, rest = [], iter(call_args)
    for kind in kinds:
        arg = next(rest)
        if kind == "h":
            args.append(f"h:{body.slot(arg)}")
        elif kind == "o":
            m = re.fullmatch(rf"&temporary_reference\(({NAME})\.get\(\)\)", arg)
            if arg != "nullptr" and m is None:
                raise Unsupported(f"optional tensor {arg!r}")
            args.append(f"o:{body.slot(m.group(1))}" if m else "o:-")
        elif kind == "a":
            args.append("a:" + ";".join(body.expr(v, "i") for v in _int_array(body, arg, next(rest), literals)))
        elif kind == "r":
            m = re.fullmatch(rf"&({NAME})_handle", arg)
            if m is None or m.group(1) not in body.pending or body.pending[m.group(1)] is not None:
                raise Unsupported(f"returned handle {arg!r}")
            body.pending[m.group(1)] = body.slots
            args.append(f"r:{body.slots}")
            body.slots += 1
        else:
            args.append(f"{kind}:{body.expr(arg, 'd' if kind == 'd' else 'i')}")
    return " ".join(["extern", name, str(len(args)), *args])


def _int_array(body, pointer: str, length: str, literals: dict) -> list:
    """An int array argument's values: a literal of the call, or a named array."""
    if pointer in literals:
        size, text = literals[pointer]
        values = split_arguments(text)
    else:
        values, size = body.arrays.get(pointer), None
        if values is None:
            raise Unsupported(f"int array {pointer!r}")
    if not length.isdigit() or int(length) != len(values) or size not in (None, len(values)):
        raise Unsupported(f"int array {pointer!r} of length {length}")
    body.highest_rank = max(body.highest_rank, len(values))
    return values
