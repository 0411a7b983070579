"""Why a call or a graph was not compiled (raised by the compiler, answered by the miss path).

Every refusal is a :class:`NotCompiled`. The compile/cache service (eagerc/cache.py)
decides from its type what to remember: a :class:`CompileError` says where (its
``remembered``: on disk, in this process, or nowhere); :class:`NeedsHostAliases` is a
decision about the op, recorded; :class:`SpecializeValues` asks the caller to retry with
another signature, and :class:`EagerRaises` (the call is a user error) is never recorded.
"""
from __future__ import annotations

import re

# Where a CompileError is remembered.
ON_DISK = "disk"        # a property of the signature: the cache (whose namespace names
                        # torch and eagerc, so an upgrade tries again) and L1
IN_PROCESS = "process"  # something about this machine or process (the C++ compiler could
                        # not run, out of memory): L1 only, a new process tries again
NOWHERE = "never"       # the caller's context (a dispatch mode): asked again next call


class NotCompiled(Exception):
    """The compiler did not produce an artifact for this call."""


class CompileError(NotCompiled):
    """The call cannot be compiled; the message says why (it becomes a fallback reason).

    ``remembered`` (ON_DISK, IN_PROCESS or NOWHERE): only a failure that is a property of
    the signature (eager accepted this very call, and the same call fails again in any
    process with this torch and eagerc) goes on disk.
    """

    def __init__(self, reason: str, remembered: str = ON_DISK):
        super().__init__(reason)
        assert remembered in (ON_DISK, IN_PROCESS, NOWHERE), remembered
        self.remembered = remembered


class InductorFailed(CompileError):
    """Inductor itself failed on a traced graph (the cause is chained)."""


# A compiler diagnostic about the generated source ("x.main.cpp:18:55: error: ..."): the
# code is wrong, and will be wrong again on any machine (Inductor's resize_ shim call with
# one argument too many, torch 2.13), unlike a compiler that could not run at all.
_SOURCE_ERROR = re.compile(r"\.(?:cpp|h|cu):\d+:\d+: (?:fatal )?error:")


def environment_failure(e: BaseException) -> bool:
    """Whether `e` (or an exception it chains) is about the machine, not the graph: a file
    or process error, memory, a timeout, or the C++ compiler failing to run (a diagnostic
    about the generated source is the graph's)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ == "CppCompileError" and _SOURCE_ERROR.search(str(e)):
            return False
        if isinstance(e, (OSError, MemoryError, TimeoutError)) or type(e).__name__ in (
                "CppCompileError", "CalledProcessError", "SubprocessError", "BrokenProcessPool"):
            return True
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return False


class EagerRaises(NotCompiled):
    """Eager's own kernel raises for this call (a user error, or a dtype eager does not
    support): the caller raises the same exception type with the same message."""

    KINDS = ("RuntimeError", "IndexError", "ValueError", "TypeError", "NotImplementedError",
             "LinAlgError")

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind if kind in self.KINDS else "RuntimeError"
        self.message = message

    @classmethod
    def from_exception(cls, e: BaseException) -> "EagerRaises":
        kinds = [k.__name__ for k in type(e).__mro__ if k.__name__ in cls.KINDS]
        return cls(kinds[0] if kinds else "RuntimeError", str(e))


class SpecializeValues(NotCompiled):
    """Tracing failed with lifted scalars; retry with scalar values in the key.

    ``remembered`` ON_DISK where the lifted trace failed (a property of the signature, as
    a failed trace is: native_layer_norm's `float eps` takes no SymFloat), so a new
    process asks for values at once instead of tracing again; NOWHERE where Inductor
    failed on the lifted graph (that may be the machine's, not the signature's)."""

    def __init__(self, reason: str, remembered: str = NOWHERE):
        super().__init__(reason)
        assert remembered in (ON_DISK, NOWHERE), remembered
        self.remembered = remembered


class NeedsHostAliases(NotCompiled):
    """The kernel calls ATen CPU functions directly (extern kernels such as mm or
    convolution through the C shim), which take CPU tensors only: on a host-memory device
    this op must run on zero-copy CPU aliases of its tensors."""


def error_summary(e: BaseException) -> str:
    """'Type: first line of the message' (at most 200 characters), for reasons and logs."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"
