"""One status per (overload, dtype), decided from what eagerc counted while the samples
ran (eagerc.stats() before and after each call), the artifacts the service loaded, and
the comparison with CPU eager. docs/coverage.md defines each status.

    >>> from eagerc.coverage.classify import worst
    >>> worst(["pass", "extern", "pass"])
    'extern'
"""
from __future__ import annotations

import re

from eagerc import codegen as code_generators

# From worst to best: an op's status is its worst sample's. Working statuses last.
ORDER = ("crash", "timeout", "mismatch", "error", "compile_error", "unsupported_arg",
         "no_kernel", "host", "aliased", "composite", "extern", "random", "pass", "runtime",
         "not_served", "decomposed", "no_sample")
WORKING = ("pass", "extern", "aliased", "composite", "runtime", "random", "host")
STATUSES = ORDER

_COUNTERS = ("hits", "misses", "fallbacks", "aliased", "interim", "externs", "host_round_trips",
             "compiles", "disk_loads")
# Calls from a compiled artifact into an ATen kernel through the AOTInductor C shim
# (aoti_torch_cpu_mm_out, aoti_torch_cuda_addmm_out) or the dispatcher.
_EXTERN = re.compile(rb"aoti_torch_(?:cpu|cuda)_[A-Za-z0-9_]+|aoti_torch_proxy_executor_call_function"
                     rb"|aoti_torch_call_dispatcher")
# Inductor's RNG draws its seeds with randint; that is not the op's computation.
_NOT_EXTERN = {"aoti_torch_cpu_randint_low_out", "aoti_torch_cuda_randint_low_out",
               # The CUDA shim's runtime helpers (device guard, raw allocator memory).
               "aoti_torch_cuda_guard_set_index", "aoti_torch_cuda_caching_allocator_raw_alloc",
               "aoti_torch_cuda_caching_allocator_raw_delete"}


# What served an op as a vendor's accelerator would see it (--vendor: aliases off): a
# compiled kernel, an accelerator decomposition compiled (eagerc/compile/
# accelerator/decompositions.py), an extern (a compiled wrapper's library call, named in the
# record, or a call the holder gave the vendor library the code generator lists:
# Codegen.vendor_externs), the host (the host round trip, or ATen's CPU kernel on aliases),
# another op's kernels (composite), the device runtime, or nothing that worked.
SERVED_BY = ("compiled", "decomposition", "extern", "host", "composite", "runtime", "none")


def served_by(status: str, op: str, externs=(), decomposed=frozenset()) -> str | None:
    """What served one (op, dtype) record; None for statuses that ran nothing
    (not_served, decomposed, no_sample). `decomposed`: ops ("aten::cummax") traced with
    an accelerator decomposition in this run."""
    if status in ("not_served", "decomposed", "no_sample"):
        return None
    if status in ("host", "aliased", "compile_error"):
        return "host"
    if status in ("composite", "runtime"):
        return status
    if status == "extern" or externs:
        return "extern" if status in ("extern", "pass", "random") else "none"
    if status in ("pass", "random"):
        return "decomposition" if op in decomposed else "compiled"
    return "none"


def accelerator_decomposed_ops(device: str) -> frozenset:
    """The overloads the accelerator decompositions cover on `device` (its code generator
    decides which special functions), as coverage names them."""
    from eagerc.compile.accelerator.decompositions import for_codegen
    from eagerc.targets import TargetError, for_device

    try:
        codegen = for_device(device).codegen
    except TargetError:
        return frozenset()
    return frozenset("aten::" + (op._schema.name.split("::")[1]
                                 + ("" if op._schema.overload_name == "" else "." + op._schema.overload_name))
                     for op in for_codegen(codegen))


def worst(statuses) -> str:
    return min(statuses, key=ORDER.index)


def stats_delta(before: dict, after: dict) -> dict:
    """Per op key ("aten::mm@PrivateUse1"): counters that moved, and new fallback reasons."""
    out = {}
    for key, now in after.items():
        was = before.get(key, {})
        moved = {c: now.get(c, 0) - was.get(c, 0) for c in _COUNTERS}
        moved = {c: n for c, n in moved.items() if n}
        reasons = {r: n - was.get("fallback_reasons", {}).get(r, 0)
                   for r, n in now.get("fallback_reasons", {}).items()}
        reasons = {r: n for r, n in reasons.items() if n > 0}
        if moved or reasons:
            out[key] = {**moved, "fallback_reasons": reasons}
    return out


def externs(artifact_paths) -> list:
    """ATen/vendor kernels the artifacts call instead of generated code."""
    found = set()
    for path in artifact_paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        found |= {m.decode() for m in _EXTERN.findall(code_generators.naming_calls(data))}
    return sorted(found - _NOT_EXTERN)


def served_status(counters: dict, extern_calls: list, composite: bool = False) -> tuple:
    """(status, detail) of one op's holder from its moved counters. `composite`: on a new
    device, the op's fallback is its CompositeExplicitAutograd kernel (it calls other ops,
    which the device serves)."""
    reasons = counters.get("fallback_reasons") or {}
    if counters.get("fallbacks") or reasons:
        reason = next(iter(reasons), "fell back (no reason recorded)").strip().splitlines()[0][:300]
        # Aliases off, a device with no native kernels: the last two rungs (docs/vendor.md).
        if counters.get("host_round_trips"):
            return "host", f"the host round trip: copied to CPU, ATen's CPU kernel, copied back (not compiled: {reason})"
        if counters.get("externs"):
            return "extern", f"the vendor library's kernel its code generator lists, on the device's memory (not compiled: {reason})"
        if counters.get("aliased", 0) >= counters.get("fallbacks", 0) > 0:
            # Not compiled, but served: a host-memory device runs ATen's kernel of its
            # memory's home on aliases (EAGERC_ALIAS_FALLBACK, the default there).
            return "aliased", f"ATen's CPU kernel on zero-copy aliases (not compiled: {reason})"
        if composite:
            return "composite", f"its CompositeExplicitAutograd kernel ran (not compiled: {reason})"
        return "compile_error", reason
    if counters.get("aliased"):
        return "aliased", "ATen's CPU kernel on zero-copy aliases"
    if counters.get("interim"):
        return "aliased", "served interim while compiling in the background"
    if extern_calls:
        return "extern", ", ".join(extern_calls)
    return "pass", ""


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]
