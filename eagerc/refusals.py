"""Why a call or a graph was not compiled (raised by the compiler, answered by the miss path).

Every refusal is a :class:`NotCompiled`, and each kind carries what it means in one place:
its ``record()`` (what it leaves on disk: only what is a property of the key; the
compile/cache service, eagerc/cache.py, stores it and :func:`recorded` reads it back), its
``answer()`` (the op miss's answer to the kernel holder, eagerc/per_op/resolver.py) and its
``log_line()`` (what the service logs, and whether it is a failure the user sees).
A :class:`CompileError` says where it is remembered (its ``remembered``: on disk, in this
process, or nowhere); :class:`NeedsHostAliases` is a decision about the op, recorded;
:class:`SpecializeValues` sends the miss on with the call's scalar values in its key, and
:class:`EagerRaises` (the call is a user error) is never recorded.
"""
from __future__ import annotations

import logging
import re
from typing import ClassVar, Iterator

# Where a CompileError is remembered.
ON_DISK = "disk"        # a property of the signature: the cache (whose namespace names
                        # torch and eagerc, so an upgrade tries again) and L1
IN_PROCESS = "process"  # something about this machine or process (the C++ compiler could
                        # not run, out of memory): L1 only, a new process tries again
NOWHERE = "never"       # the caller's context (a dispatch mode): asked again next call


class NotCompiled(Exception):
    """The compiler did not produce an artifact for this call.

    A kind that is recorded names its field in a store entry's metadata
    (``record_field``) and reads itself back (``from_record``)."""

    record_field: ClassVar[str | None] = None
    _recorded_kinds: ClassVar[list] = []
    is_failure: ClassVar[bool] = True  # the call runs without a kernel of its own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "record_field" in cls.__dict__:
            NotCompiled._recorded_kinds.append(cls)

    def record(self) -> dict | None:
        """The metadata it leaves on disk (None: nothing, it is not the key's property)."""
        return None

    @classmethod
    def from_record(cls, metadata: dict) -> "NotCompiled":
        return cls(metadata[cls.record_field])

    def answer(self):
        """The op miss's answer (an `eagerc._C.MissAnswer`). A refusal of no known kind
        falls back, asked again next call: it says nothing about the signature."""
        return _miss_answers().fallback(str(self), False)

    def log_line(self, name: str) -> tuple:
        """(level, message) the compile/cache service logs for `name` (an op, a graph)."""
        return logging.INFO, f"{name} not compiled: {self}"


def recorded(metadata: dict) -> NotCompiled | None:
    """The refusal a store entry's metadata records, or None (the entry is a kernel)."""
    for kind in NotCompiled._recorded_kinds:
        if kind.record_field in metadata:
            return kind.from_record(metadata)
    return None


def _miss_answers():
    import _eagerc as _C

    return _C.MissAnswer


class CompileError(NotCompiled):
    """The call cannot be compiled; the message says why (it becomes a fallback reason).

    ``remembered`` (ON_DISK, IN_PROCESS or NOWHERE): only a failure that is a property of
    the signature (eager accepted this very call, and the same call fails again in any
    process with this torch and eagerc) goes on disk.
    """

    record_field = "fallback"

    def __init__(self, reason: str, remembered: str = ON_DISK):
        super().__init__(reason)
        assert remembered in (ON_DISK, IN_PROCESS, NOWHERE), remembered
        self.remembered = remembered

    def record(self) -> dict | None:
        return {self.record_field: str(self)} if self.remembered == ON_DISK else None

    def answer(self):
        # Remembered in L1 unless the caller's context caused it (a dispatch mode).
        return _miss_answers().fallback(str(self), self.remembered != NOWHERE)


class InductorFailed(CompileError):
    """Inductor itself failed on a traced graph (the cause is chained)."""


# A compiler diagnostic about the generated source ("x.main.cpp:18:55: error: ..."): the
# code is wrong, and will be wrong again on any machine (Inductor's resize_ shim call with
# one argument too many, torch 2.13), unlike a compiler that could not run at all.
_SOURCE_ERROR = re.compile(r"\.(?:cpp|h|cu):\d+:\d+: (?:fatal )?error:")


def causes(e: BaseException | None, implicit: bool = True) -> Iterator[BaseException]:
    """`e`, then each exception it chains, each once: an explicit ``inner_exception``
    (Inductor's wrapped backend errors), else ``__cause__``, else (with `implicit`) the
    ``__context__`` it was raised while handling."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = getattr(e, "inner_exception", None) or e.__cause__ or (e.__context__ if implicit else None)


def environment_failure(e: BaseException) -> bool:
    """Whether `e` (or an exception it chains) is about the machine, not the graph: a file
    or process error, memory, a timeout, or the C++ compiler failing to run (a diagnostic
    about the generated source is the graph's)."""
    for cause in causes(e):
        if type(cause).__name__ == "CppCompileError" and _SOURCE_ERROR.search(str(cause)):
            return False
        if isinstance(cause, (OSError, MemoryError, TimeoutError)) or type(cause).__name__ in (
                "CppCompileError", "CalledProcessError", "SubprocessError", "BrokenProcessPool"):
            return True
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

    def answer(self):
        return _miss_answers().raise_error(self.kind, self.message)


class SpecializeValues(NotCompiled):
    """Tracing failed with lifted scalars: the miss goes on with the call's scalar values
    in its key (the resolver answers that signature; the holder keys the op by values).

    ``remembered`` ON_DISK where the lifted trace failed (a property of the signature, as
    a failed trace is: native_layer_norm's `float eps` takes no SymFloat), so a new
    process asks for values at once instead of tracing again; NOWHERE where Inductor
    failed on the lifted graph (that may be the machine's, not the signature's)."""

    record_field = "specialize_values"

    def __init__(self, reason: str, remembered: str = NOWHERE):
        super().__init__(reason)
        assert remembered in (ON_DISK, NOWHERE), remembered
        self.remembered = remembered

    def record(self) -> dict | None:
        return {self.record_field: str(self)} if self.remembered == ON_DISK else None

    is_failure = False

    def log_line(self, name: str) -> tuple:
        # Not a failure the user sees: the op compiles at once with its scalar values in
        # the key (logged then).
        return logging.DEBUG, f"{name} compiles with scalar values in its key: {(str(self).splitlines() or [''])[0]}"

    def answer(self):
        # Only where the call has no signature with values (one the holder cannot key):
        # the call runs without a kernel, asked again next time.
        return _miss_answers().fallback(f"lifted scalars did not trace, and the call cannot "
                                        f"be keyed by their values: {self}", False)


class NeedsHostAliases(NotCompiled):
    """The kernel calls ATen CPU functions directly (extern kernels such as mm or
    convolution through the C shim), which take CPU tensors only: on a host-memory device
    this op must run on zero-copy CPU aliases of its tensors."""

    record_field = "needs_host_aliases"

    def record(self) -> dict | None:
        return {self.record_field: True}

    @classmethod
    def from_record(cls, metadata: dict) -> "NeedsHostAliases":
        return cls(metadata.get("op", ""))

    is_failure = False  # compiled: the kernel runs on aliases

    def log_line(self, name: str) -> tuple:
        return logging.INFO, (f"{name} runs on aliases of its memory home's tensors: its kernel "
                              f"calls the home's ATen function")

    def answer(self):
        return _miss_answers().run_on_host_aliases()


def error_summary(e: BaseException) -> str:
    """'Type: first line of the message' (at most 200 characters), for reasons and logs."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"
