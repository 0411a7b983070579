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

# Settings that never change the generated code.
_NOT_CODE = re.compile(r"cache|compile_threads|worker|trace\.|verbose|log|debug_dir|profil|benchmark_harness")


def inductor_environment() -> list:
    """TORCHINDUCTOR_* variables that may change code, as sorted (name, value) pairs."""
    return sorted((k, v) for k, v in _config.variables("TORCHINDUCTOR_")
                  if not _NOT_CODE.search(k.lower()))


def inductor_overrides() -> list:
    """Entries of torch._inductor.config a program set to a non-default value (none when
    the module was never imported: nothing could have set them)."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return []
    from torch.utils._config_module import _UNSET_SENTINEL

    changed = []
    for name, entry in getattr(config, "_config", {}).items():
        if _NOT_CODE.search(name):
            continue
        value = entry.user_override
        if isinstance(value, contextvars.ContextVar):  # torch >= 2.13; a plain value before
            value = value.get()
        if value is not _UNSET_SENTINEL and value != entry.default:
            changed.append((name, repr(value)))
    return sorted(changed)
