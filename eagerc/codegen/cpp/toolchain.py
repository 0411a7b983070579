"""The C++ compiler eagerc builds generated wrappers and kernels with: part of every cache key
(the C++ code generator's and the Triton code generator's, whose wrappers are host C++ too;
how eagerc has Inductor run it is each code generator's build_recipe)."""
from __future__ import annotations

import functools
import os
import shutil

from eagerc.environment_memo import until_environment_changes

# Everything cxx_compiler's answer is made of, but the compiler file itself: the compiler
# chosen (CXX), where it is looked up (PATH), and the flags variables.
IDENTITY_VARIABLES = ("CXX", "PATH", "CXXFLAGS", "CPPFLAGS", "LDFLAGS")


@until_environment_changes
def cxx_compiler() -> str:
    """The C++ compiler Inductor runs, identified by path, size and modification time (a
    compiler upgrade changes them), and the flags variables it reads.

    Every cache lookup asks for it: the variables are read again only when the
    environment changed, and the compiler's file is looked at (``shutil.which``, ``stat``,
    ``realpath``: half a millisecond of each miss when done per lookup) once per value of
    :data:`IDENTITY_VARIABLES`. A compiler replaced in place while a process runs keeps
    its old identity in that process."""
    return _identity(tuple(os.environ.get(v) for v in IDENTITY_VARIABLES))


@functools.lru_cache(maxsize=16)
def _identity(variables: tuple) -> str:
    values = dict(zip(IDENTITY_VARIABLES, variables))
    name = values["CXX"] or "g++"
    # The PATH of the memo's key (None, unset: shutil.which's default search path).
    path = shutil.which(name, path=values["PATH"]) or name
    try:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        ident = path
    flags = tuple(values[v] or "" for v in ("CXXFLAGS", "CPPFLAGS", "LDFLAGS"))
    return f"{ident}|{flags}"
