"""The compiler settings that change generated code: part of every cache key.

Read without importing Inductor when no one has: a process whose kernels are all on disk
never pays Inductor's import (about a second). Until something imports
``torch._inductor.config``, Inductor's settings are this torch's defaults (the torch
version is in the key) except what ``TORCHINDUCTOR_*`` variables set; once imported, every
entry a program changed (``config.x = ...``) counts too. Entries that only steer caches,
logging or worker processes are left out: they do not change code.
"""
from __future__ import annotations

import contextvars
import re
import sys

from eagerc import _config
from eagerc.environment_memo import until_environment_changes

# Settings that never change the generated code. "log" only as a word of the name:
# epilogue_fusion and prologue_fusion change it.
_NOT_CODE = re.compile(r"cache|compile_threads|worker|trace\.|verbose|(?:^|[._])log(?:_|ging|$)|debug_dir|"
                       r"profil|benchmark_harness")


def inductor_environment() -> list:
    """TORCHINDUCTOR_* variables that may change code, as sorted (name, value) pairs (read
    again only when the environment changed: every cache lookup asks)."""
    return list(_inductor_environment())


@until_environment_changes
def _inductor_environment() -> list:
    return sorted((k, v) for k, v in _config.variables("TORCHINDUCTOR_")
                  if not _NOT_CODE.search(k.lower()))


def inductor_overrides() -> list:
    """Entries of torch._inductor.config a program set to a non-default value (none when
    the module was never imported: nothing could have set them)."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return []
    from torch.utils._config_module import _UNSET_SENTINEL

    entries = getattr(config, "_config", {})
    by_variable = _entries_by_variable(entries)
    if by_variable is not None:
        # Each entry's override is a ContextVar (torch >= 2.13): only the variables set in
        # this context can hold one, so those are read instead of all ~600 entries (this
        # runs at every new signature's store lookup).
        found = ((by_variable[variable], value)
                 for variable, value in contextvars.copy_context().items() if variable in by_variable)
    else:
        found = (((name, entry), entry.user_override) for name, entry in entries.items())
    changed = []
    for (name, entry), value in found:
        if value is not _UNSET_SENTINEL and value != entry.default and not _NOT_CODE.search(name):
            changed.append((name, repr(value)))
    return sorted(changed)


_variables: dict = {}  # id of a config's entries -> (their count, {ContextVar: (name, entry)})


def _entries_by_variable(entries: dict) -> dict | None:
    """Each entry's override ContextVar -> (name, entry); None where an override is a plain
    value (torch before 2.13). Kept per entries dict, built again when entries are added."""
    known = _variables.get(id(entries))
    if known is not None and known[0] == len(entries):
        return known[1]
    by_variable = {}
    for name, entry in entries.items():
        if not isinstance(entry.user_override, contextvars.ContextVar):
            return None
        by_variable[entry.user_override] = (name, entry)
    _variables[id(entries)] = (len(entries), by_variable)
    return by_variable
