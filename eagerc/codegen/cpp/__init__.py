"""Host C++: the code generator object (generator.py: ``CPP``, Inductor's ``CppScheduling``)
and what only C++ code needs.

- ``generator``: :class:`~eagerc.codegen.cpp.generator.CppCodegen`, its build recipe and
  its ordered rewrites of a generated wrapper;
- ``cpu_decompositions``: decompositions computing as ATen's CPU kernels do
  (``upsample_linear``: its linear interpolation);
- ``scratch_buffers``: a CPU wrapper's temporaries from a per-thread arena;
- ``wrapper_build``, ``glue_prelude``, ``vec_isa_memo``: how Inductor's C++ builds of a
  generated wrapper run under eagerc (every wrapper is host C++, a GPU wrapper too: the
  Triton code generator builds its glue with them).

Importing this package is cheap: nothing here imports Inductor at module level.
"""
