"""The compiler: an ATen call or a captured graph -> an artifact C++ can run without Python.

One module per job:

- ``trace``: op + call -> a :class:`~eagerc.compile.trace.Traced` ATen graph over fakes
  with symbolic sizes and lifted scalars;
- ``trace_graph``: a captured FX graph -> a ``Traced`` (functionalized, constants lifted);
- ``guard_source``: the tracing assumptions as C++ (``eagerc_guard``);
- ``inductor_wrapper``: ``Traced`` -> Inductor's C++ wrapper + eagerc's entry points ->
  library bytes, asking the target's code generator object (eagerc/codegen/) wherever
  kinds of code differ. The one module to re-check for each torch release (2.11 to 2.14);
- the wrapper rewrites the code generators list (``scratch_buffers``, ``scalar_reads``,
  ``boxed_int_lists``, ``direct_alloc``, ``output_asserts``, ``gpu_launch_types``,
  ``gpu_context``) and their build path (``wrapper_build``, ``glue_prelude``,
  ``lean_gpu_prelude``, ``launch_plan`` + ``cexpr`` + ``plan_build``);
- ``settings``: the compiler settings that change generated code (part of the cache key);
- ``op``: the per-op front end (describe, trace, refuse, build);
- ``errors``: why a call was not compiled.

Nothing here stores or looks up artifacts: that is the compile/cache service
(``eagerc.cache``). Importing this package is cheap; the modules import Inductor lazily.
"""
