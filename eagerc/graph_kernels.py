"""Captured graphs through the compile/cache service: a graph in, a loaded kernel out.

eagerc.capture (eagerc/capture/graph_compiler.py) asks :func:`load_or_compile` for the kernel of
one recorded torch.fx graph. The service finds it in kernel_cache, or compiles
it (eagerc/compile/trace_graph.py + inductor_wrapper.py) and stores it next to the per-op
kernels: a later process recording the same graph for the same input metadata loads the
library from disk, with no Inductor import and no compile. The artifact's guard holds the
symbolic-shape assumptions as C++, so a symbolic record checks its shapes without a
Python evaluation per call.
"""
from __future__ import annotations

import base64
import dataclasses
import io
import time

import torch

import _eagerc as _C
from eagerc.artifact import Artifact
from eagerc.cache import service
from eagerc.kernel_key import CacheKey, graph_signature
from eagerc.refusals import CompileError, NotCompiled
from eagerc.targets import TargetError, for_device

STAT_KEY = "capture-graph"


@dataclasses.dataclass
class GraphKernel:
    """A loaded graph artifact: `run(*inputs)` -> list of outputs; `guard(inputs) -> bool`."""

    run: object
    guard: object
    from_disk: bool


def _target(example_inputs):
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if len(devices) != 1:
        raise CompileError(f"graph inputs on {sorted(devices)}: eagerc compiles graphs whose "
                           "inputs are all on one device")
    try:
        return for_device(devices.pop())
    except TargetError as e:
        raise CompileError(str(e)) from None


def load_or_compile(gm, example_inputs, dynamic_dims=None) -> GraphKernel:
    """The graph's kernel for these inputs: from kernel_cache, or compiled and
    stored there. Raises CompileError when this path cannot take the graph (a failure that
    is a property of the graph is remembered on disk, so no process tries again)."""
    dynamic_dims = dynamic_dims or [[] for _ in example_inputs]
    target = _target(example_inputs)
    key = CacheKey("graph", target, "graph", graph_signature(gm, example_inputs, dynamic_dims))
    svc = service()
    try:
        with svc.locked(key):
            hit = svc.get(key, STAT_KEY)
            if hit is None:
                try:
                    artifact = _compile_graph(gm, example_inputs, dynamic_dims, target)
                except NotCompiled as refusal:
                    svc.refuse(key, refusal)
                    raise
                hit = svc.put(key, STAT_KEY, artifact)
    except NotCompiled as refusal:
        raise CompileError(str(refusal)) from None
    art = _C._GraphArtifact(hit.kernel, target.host_aliases)
    metadata = hit.entry.metadata
    return _kernel(art, _unpack(metadata["constants"]), hit.from_disk,
                   bool(metadata["writes_inputs"]), gm)


def _compile_graph(gm, example_inputs, dynamic_dims, target) -> Artifact:
    from eagerc.compile.inductor_wrapper import build_artifact
    from eagerc.compile.trace_graph import trace_graph

    start = time.perf_counter()
    traced = trace_graph(gm, example_inputs, dynamic_dims, target)
    built = build_artifact(traced, target.codegen)
    return Artifact(built.library, {**built.metadata, "constants": _pack(traced.constants),
                                    "writes_inputs": traced.writes_inputs},
                    f"a captured graph ({len(gm.graph.nodes)} nodes)", time.perf_counter() - start)


def _pack(tensors) -> str:
    buf = io.BytesIO()
    torch.save(tensors, buf)
    return base64.b64encode(buf.getvalue()).decode()


def _unpack(text: str):
    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=True)


def _kernel(art, constants, from_disk, writes_inputs, gm) -> GraphKernel:
    extra = tuple(constants)
    run = art if not extra else (lambda *inputs: art(*inputs, *extra))
    guard = art.guard if not extra else (lambda inputs: art.guard(tuple(inputs) + extra))
    if writes_inputs:
        # The functional kernel reads every input before writing any: right only while no
        # two inputs share memory. A call whose inputs overlap runs the recorded graph, op by
        # op, as the program did.
        compiled = run

        def run(*inputs):
            if _disjoint(inputs):
                return compiled(*inputs)
            return list(gm(*inputs))
    return GraphKernel(run, guard, from_disk)


def _disjoint(tensors) -> bool:
    seen = set()
    for t in tensors:
        if t.numel() == 0:
            continue
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            return False
        seen.add(ptr)
    return True
