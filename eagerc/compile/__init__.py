"""The compiler: an ATen call or a captured graph -> an artifact C++ can run without Python.

One pipeline for every kind of generated code; where kinds differ it asks the target's code
generator object (eagerc/codegen/: host C++ in codegen/cpp/, Triton in codegen/triton/,
each with the modules only it needs). One module per job:

- ``trace``: op + call -> a :class:`~eagerc.compile.trace.Traced` ATen graph over fakes
  with symbolic sizes and lifted scalars;
- ``trace_graph``: a captured FX graph -> a ``Traced`` (functionalized, constants lifted);
- ``guard_source``: the tracing assumptions as C++ (``eagerc_guard``);
- ``inductor_wrapper``: ``Traced`` -> Inductor's C++ wrapper + eagerc's entry points ->
  library bytes, asking the code generator object wherever kinds of code differ (its
  settings, its rewrites of the wrapper, its build path). The one module to re-check for
  each torch release (2.11 to 2.14);
- the wrapper rewrites every kind shares (``scalar_reads``, ``boxed_int_lists``,
  ``direct_alloc``, ``output_asserts``, over ``wrapper_source``);
- ``settings``: the Inductor settings that change generated code (part of the cache key);
- ``known_wrong``: calls Inductor compiles to other values than eager, refused;
- ``lock``: one compile at a time in a process, one per key across processes;
- ``op``: the per-op front end (describe, trace, refuse, build);
- ``accelerator/``: decompositions for a target with no kernels of its own to lean on.

Nothing here stores or looks up artifacts: that is the compile/cache service
(``eagerc.cache``). Importing this package is cheap; the modules import Inductor lazily.
"""
