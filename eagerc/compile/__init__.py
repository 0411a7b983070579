"""The compiler: an ATen call or a captured graph -> an artifact C++ can run without Python.

One module per job:

- ``trace``: op + call -> a :class:`~eagerc.compile.trace.Traced` ATen graph over fakes
  with symbolic sizes and lifted scalars;
- ``graph``: a captured FX graph -> a ``Traced`` (functionalized, constants lifted);
- ``guards``: the tracing assumptions as C++ (``eagerc_guard``);
- ``inductor_wrapper``: ``Traced`` -> Inductor's C++ wrapper + eagerc's entry points ->
  library bytes. The one module to re-check for each torch release (2.11 to 2.14);
- ``settings``: the compiler settings that change generated code (part of the cache key);
- ``op``: the per-op front end (describe, trace, refuse, build);
- ``errors``: why a call was not compiled.

Nothing here stores or looks up artifacts: that is the compile/cache service
(``eagerc.cache``). Importing this package is cheap; the modules import Inductor lazily.
"""
