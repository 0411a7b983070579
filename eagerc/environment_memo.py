"""Values worked out from environment variables, kept until the environment changes.

Every kernel cache lookup builds the key's namespace, whose components read environment
variables (TORCHINDUCTOR_*, CXX, PATH, the flags variables) and, for the C++ compiler,
the file system. Read at every lookup they were most of a key's cost (reading the whole
environment through ``os.environ`` decodes every variable); kept here, a lookup compares
the environment with a copy in one step (its variables are not decoded) and reads
nothing else while it is unchanged. Any change of ``os.environ`` (``os.environ[...] =``,
``os.putenv`` does not change it) makes every kept value be worked out again.

    >>> import os
    >>> @until_environment_changes
    ... def home():
    ...     return os.environ.get("HOME_OF_EXAMPLE", "")
    >>> os.environ["HOME_OF_EXAMPLE"] = "a"; home()
    'a'
    >>> os.environ["HOME_OF_EXAMPLE"] = "b"; home()
    'b'
    >>> del os.environ["HOME_OF_EXAMPLE"]
"""
from __future__ import annotations

import functools
import os
from typing import Callable, TypeVar

T = TypeVar("T")


def until_environment_changes(function: Callable[[], T]) -> Callable[[], T]:
    """`function()`'s answer, worked out again only when os.environ changed since; on a
    Python whose os.environ keeps no plain dict of its own, every call works it out."""
    kept = (None, None)  # (copy of os.environ's mapping, the answer worked out under it)

    @functools.wraps(function)
    def answer() -> T:
        nonlocal kept
        data = getattr(os.environ, "_data", None)
        if not isinstance(data, dict):
            return function()
        environment, value = kept
        if environment != data:
            # Copied before the answer is worked out: a change meanwhile (another thread)
            # leaves a copy that differs, and the next call works it out again.
            environment = dict(data)
            value = function()
            kept = environment, value
        return value

    return answer
