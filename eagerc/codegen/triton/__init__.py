"""Triton kernels on CUDA memory: the code generator object (generator.py: ``TRITON``,
Inductor's ``TritonScheduling``) and what only GPU wrappers need.

- ``generator``: :class:`~eagerc.codegen.triton.generator.TritonCodegen`, its build recipe,
  cubins embedded in the artifact, its ordered rewrites of a generated wrapper;
- ``gpu_launch_types``, ``gpu_context``, ``stream_declarations``: fixes to Inductor's JIT
  GPU wrapper;
- ``lean_gpu_prelude``: a GPU wrapper's header without torch's C++ headers;
- ``launch_plan`` (with ``cexpr`` and ``plan_externs``) and ``plan_build``: a wrapper of
  Triton kernels and cuBLAS calls as a launch plan that the plan launcher (plan_launcher/,
  C++ built once per machine) runs, instead of a compile;
- ``batch_norm_statistics``: the inference batch norm decomposition GPU code uses.

Importing this package is cheap: nothing here imports Inductor or Triton at module level.
"""
