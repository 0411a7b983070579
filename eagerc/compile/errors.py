"""Why a call or a graph was not compiled.

Every refusal is a :class:`NotCompiled`. The compile/cache service (eagerc/cache.py)
decides from its type what to remember on disk: a :class:`CompileError` that is a property
of the signature is recorded (so no process tries again until torch or eagerc change); a
transient one is not; :class:`NeedsHostAliases` is a decision about the op, recorded;
:class:`SpecializeValues` asks the caller to retry with another signature, never recorded.
"""
from __future__ import annotations


class NotCompiled(Exception):
    """The compiler did not produce an artifact for this call."""


class CompileError(NotCompiled):
    """The call cannot be compiled; the message says why (it becomes a fallback reason).

    ``permanent``: the failure is a property of the signature (the same call fails again in
    any process with this torch and eagerc), so it may be remembered. A failure caused by the
    caller's context (a dispatch mode or ``no_dispatch`` active while tracing) is not.
    """

    def __init__(self, reason: str, permanent: bool = True):
        super().__init__(reason)
        self.permanent = permanent


class InductorFailed(CompileError):
    """Inductor itself failed on a traced graph (the cause is chained)."""


class SpecializeValues(NotCompiled):
    """Tracing failed with lifted scalars; retry with scalar values in the key."""


class NeedsHostAliases(NotCompiled):
    """The kernel calls ATen CPU functions directly (extern kernels such as mm or
    convolution through the C shim), which take CPU tensors only: on a host-memory device
    this op must run on zero-copy CPU aliases of its tensors."""


def error_summary(e: BaseException) -> str:
    """'Type: first line of the message' (at most 200 characters), for reasons and logs."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"
