"""The key's inductor_config component (eagerc/compile/settings.py) reads only the config
variables set in the caller's context, not every entry: it must name exactly what a
full scan of Inductor's settings names, whatever way a setting was changed."""
from __future__ import annotations

import contextvars
import sys
import threading

import torch._inductor.config as config
from torch.utils._config_module import _UNSET_SENTINEL

from eagerc.compile import settings


def full_scan() -> list:
    """Every entry read: a value set in this context that differs from its default."""
    changed = []
    for name, entry in config._config.items():
        value = entry.user_override
        if isinstance(value, contextvars.ContextVar):
            value = value.get()
        if value is not _UNSET_SENTINEL and value != entry.default \
                and not settings._NOT_CODE.search(name):
            changed.append((name, repr(value)))
    return sorted(changed)


def test_the_overrides_are_what_a_full_scan_finds(monkeypatch):
    seen = [settings.inductor_overrides()]
    assert seen[0] == full_scan()
    monkeypatch.setattr(config, "max_autotune", not config.max_autotune)
    monkeypatch.setattr(config.cpp, "simdlen", 8)            # a nested entry
    monkeypatch.setattr(config, "compile_threads", 3)        # not code: never named
    seen.append(settings.inductor_overrides())
    assert seen[-1] == full_scan()
    assert ("cpp.simdlen", "8") in seen[-1] and not any(n == "compile_threads" for n, _ in seen[-1])
    with config.patch(fallback_random=not config.fallback_random):
        assert settings.inductor_overrides() == full_scan()
        assert any(n == "fallback_random" for n, _ in settings.inductor_overrides())
    assert settings.inductor_overrides() == seen[-1]
    monkeypatch.setattr(config, "max_autotune", config._config["max_autotune"].default)
    assert settings.inductor_overrides() == full_scan()      # set back to its default


def test_another_threads_settings_are_its_own(monkeypatch):
    monkeypatch.setattr(config, "freezing", not config._config["freezing"].default)
    here = settings.inductor_overrides()
    there = {}

    def other_thread():
        there["before"] = (settings.inductor_overrides(), full_scan())
        # epilogue_fusion changes code ("log" inside its name does not make it a logging knob)
        config.epilogue_fusion = not config._config["epilogue_fusion"].default
        there["after"] = (settings.inductor_overrides(), full_scan())

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert there["before"][0] == there["before"][1] and ("freezing", repr(config.freezing)) not in there["before"][0]
    assert there["after"][0] == there["after"][1] and any(n == "epilogue_fusion" for n, _ in there["after"][0])
    assert settings.inductor_overrides() == here == full_scan()


def test_plain_overrides_of_an_older_torch_are_read(monkeypatch):
    """torch before 2.13 (2.11 on the GPU machine) keeps an override as a plain value, not
    a ContextVar: the full read of the entries serves there (it raised NameError, and
    every miss on torch 2.11 fell back)."""
    from types import SimpleNamespace

    entries = {"max_autotune": SimpleNamespace(default=False, user_override=True),
               "cpp.simdlen": SimpleNamespace(default=None, user_override=_UNSET_SENTINEL),
               "compile_threads": SimpleNamespace(default=1, user_override=3)}
    monkeypatch.setitem(sys.modules, "torch._inductor.config", SimpleNamespace(_config=entries))
    assert settings._entries_by_variable(entries) is None
    assert settings.inductor_overrides() == [("max_autotune", "True")]
