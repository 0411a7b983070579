"""The C++ compiler eagerc builds generated wrappers and kernels with: part of every cache key
(the C++ code generator's and the Triton code generator's, whose wrappers are host C++ too;
how eagerc has Inductor run it is each code generator's build_recipe)."""
from __future__ import annotations

import os
import shutil

from eagerc import _config

def cxx_compiler() -> str:
    """The C++ compiler Inductor runs, identified by path, size and modification time (a
    compiler upgrade changes them), and the flags variables it reads."""
    name = _config.variable("CXX") or "g++"
    path = shutil.which(name) or name
    try:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        ident = path
    flags = tuple(_config.variable(v) for v in ("CXXFLAGS", "CPPFLAGS", "LDFLAGS"))
    return f"{ident}|{flags}"
