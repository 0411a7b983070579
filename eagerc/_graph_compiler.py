"""Compile a captured operator graph through eagerc's compile/cache layer.

eagerc.capture records one torch.fx graph per record. It is compiled the way one ATen op is
(_compiler.py): traced to ATen over fake tensors (functionalized when it writes into a
tensor; Inductor's decompositions), compiled by Inductor's C++ wrapper into a shared library
with ``eagerc_entry`` and ``eagerc_guard``, and stored in kernel_cache next to the per-op
kernels. A later process that records the same graph for the same input metadata loads the
library from disk: no Inductor import, no compile. The guard holds the symbolic-shape
assumptions as C++, so a symbolic record checks its shapes without a Python evaluation per
call.

Graphs this path does not take (an output aliasing an input, inputs on devices other than
the CPU and the eagerc device, a graph that does not trace) raise CompileError; the capture
backend then compiles them with Inductor's ``compile_fx`` (whose AOTAutograd regenerates
aliases).
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import logging
import time

import torch

from eagerc import _stats

log = logging.getLogger("eagerc")
_STAT_KEY = "capture-graph"


@dataclasses.dataclass
class GraphKernel:
    """A loaded graph artifact: `run(*inputs)` -> list of outputs; `guard(tuple) -> bool`."""

    run: object
    guard: object
    from_disk: bool


def graph_key(gm, example_inputs, dynamic_dims) -> bytes:
    """What the artifact depends on: the graph's code and each input's metadata (symbolic
    dims as 's'; strides and offsets of static inputs exactly, since the kernel assumes them)."""
    parts = [gm.code]
    for t, dims in zip(example_inputs, dynamic_dims):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"a compiled graph takes tensors, got {type(t).__name__}")
        sizes = ["s" if d in dims else str(n) for d, n in enumerate(t.shape)]
        strides = ["?"] * t.dim() if dims else [str(s) for s in t.stride()]
        parts.append(f"{t.dtype}|{t.device}|{','.join(sizes)}|{','.join(strides)}|"
                     f"{t.storage_offset() if not dims else '?'}")
    return b"graph\0" + hashlib.sha256("\n".join(parts).encode()).hexdigest().encode()


def load_or_compile(gm, example_inputs, dynamic_dims=None) -> GraphKernel:
    """The graph's kernel for these inputs: from kernel_cache, or compiled and stored there.
    Raises CompileError when this path cannot take the graph (the reason is remembered on
    disk, so no process tries again)."""
    from eagerc import _C
    from eagerc._compiler import CompileError, _cpu_standin
    from eagerc._resolver import key_lock, remember_failure, store, stored_entries

    dynamic_dims = dynamic_dims or [[] for _ in example_inputs]
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if not devices <= {"cpu", "eagerc"} or len(devices) > 1:
        raise CompileError(f"graph inputs on {sorted(devices)}: eagerc compiles graphs whose "
                           "inputs are all on the CPU or all on the eagerc device")
    # The eagerc device keeps its memory on the host: its graphs are compiled for the CPU
    # target from CPU stand-ins and run on zero-copy CPU aliases (see csrc/graph_artifact.cpp).
    on_device = devices == {"eagerc"}
    key = graph_key(gm, example_inputs, dynamic_dims)
    with key_lock(key):
        for entry in stored_entries(key):
            if "fallback" in entry.metadata:
                raise CompileError(entry.metadata["fallback"])
            try:
                art = _C._GraphArtifact(entry.variant_id, entry.artifact_path,
                                        int(entry.metadata["num_outputs"]), on_device)
                constants = _unpack(entry.metadata["constants"])
                writes = bool(entry.metadata["writes_inputs"])
            except Exception as e:  # noqa: BLE001 - a broken entry is rebuilt, never a crash
                log.warning("eagerc: dropping an unloadable graph artifact: %s", e)
                store().evict(key, entry.variant_id)
                continue
            _stats.count(_STAT_KEY, "disk_loads")
            return _kernel(art, constants, True, writes, gm)
        start = time.perf_counter()
        try:
            library, num_outputs, guard, constants, writes = _compile(
                _for_cpu_target(gm) if on_device else gm,
                [_cpu_standin(t) for t in example_inputs] if on_device else example_inputs,
                dynamic_dims)
        except CompileError as e:
            remember_failure(key, _STAT_KEY, str(e))
            raise
        seconds = time.perf_counter() - start
        _stats.count(_STAT_KEY, "compiles")
        _stats.count(_STAT_KEY, "compile_seconds", seconds)
        log.info("eagerc: compiled a captured graph (%d nodes) in %.2f s",
                 len(gm.graph.nodes), seconds)
        entry = store().add(key, library, {"num_outputs": num_outputs, "op": "capture-graph",
                                           "guard": guard, "compile_seconds": seconds,
                                           "constants": _pack(constants),
                                           "writes_inputs": writes})
        art = _C._GraphArtifact(entry.variant_id, entry.artifact_path, num_outputs, on_device)
        return _kernel(art, constants, False, writes, gm)


def _compile(gm, example_inputs, dynamic_dims):
    """Returns (library, num_outputs, guard source, constants, whether it writes inputs)."""
    from eagerc._compiler import CompileError, compile_traced, error_summary

    try:
        traced, fake_mode, shape_env, fakes, (bindings, checks), n_out = _trace(
            gm, example_inputs, dynamic_dims)
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - any tracing failure: the graph takes another path
        raise CompileError(f"tracing failed: {error_summary(e)}") from e
    constants = _lift_constants(traced, fake_mode, fakes, checks)
    library, num_outputs, guard = compile_traced(
        traced, fake_mode, shape_env, fakes, bindings, checks, n_out)
    return library, num_outputs, guard, constants, traced.meta["writes_inputs"]


def _lift_constants(traced, fake_mode, fakes, checks):
    """Tensor constants made while tracing (`torch.tensor(...)` in the program) become extra
    trailing inputs: the artifact then needs no constant table, and they are stored with it.
    Their guard slots are checked like any static input."""
    from eagerc._compiler import _bindings_and_checks

    consts = []
    first = next(n for n in traced.graph.nodes if n.op != "placeholder")
    n_ints = sum(2 * f.dim() + 1 for f in fakes)
    for node in [n for n in traced.graph.nodes if n.op == "get_attr"]:
        value = getattr(traced, node.target)
        if not isinstance(value, torch.Tensor):
            from eagerc._compiler import CompileError

            raise CompileError(f"graph attribute {node.target} is a {type(value).__name__}")
        with traced.graph.inserting_before(first):
            ph = traced.graph.placeholder(f"const{len(consts)}")
        fake = fake_mode.from_tensor(value, static_shapes=True)
        ph.meta["val"] = fake
        node.replace_all_uses_with(ph)
        traced.graph.erase_node(node)
        delattr(traced, node.target)
        consts.append(value.detach().clone())
        _, const_checks = _bindings_and_checks([("t", fake, n_ints)])
        checks.extend(const_checks)
        fakes.append(fake)
        n_ints += 2 * value.dim() + 1
    if consts:
        traced.recompile()
    return consts


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


def _trace(gm, example_inputs, dynamic_dims):
    """`gm` as a functional ATen graph over fake inputs of one ShapeEnv (the dims in
    `dynamic_dims` symbolic, all others static)."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._dynamo.source import LocalSource
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from eagerc._compiler import CompileError, _bindings_and_checks, fake_input, seed_random_ops

    # No duck sizing: sizes equal by coincidence in this run stay separate symbols.
    shape_env = ShapeEnv(duck_shape=False)
    fake_mode = FakeTensorMode(shape_env=shape_env)
    fakes, slots, n_ints = [], [], 0
    for k, (t, dims) in enumerate(zip(example_inputs, dynamic_dims)):
        fake = fake_input(fake_mode, t, dims, LocalSource(f"input{k}"))
        fakes.append(fake)
        slots.append(("t", fake, n_ints))
        n_ints += 2 * t.dim() + 1
    # Bind the symbols before tracing: once tracing proves two of them equal, the fakes
    # report the replacement, and the guard must still read every original symbol.
    bindings_and_checks = _bindings_and_checks(slots)
    with fake_mode, enable_python_dispatcher(), torch.no_grad():
        traced = make_fx(gm, decomposition_table=select_decomp_table(), tracing_mode="real")(*fakes)
        _check_no_output_aliases(traced, fakes)
        writes = any(_mutates(n) for n in traced.graph.nodes)
        if writes:
            # Inductor wants a functional graph: writes into inputs become copies back into
            # them. Only then, since functionalizing in C++ reads sizes as ints through
            # composite ops (linear on 3-d input), which would specialize symbolic dims.
            fn = torch.func.functionalize(gm, remove="mutations")
            traced = make_fx(fn, decomposition_table=select_decomp_table(),
                             tracing_mode="real")(*fakes)
        if any(isinstance(n.target, torch._ops.OpOverload)
               and torch.Tag.nondeterministic_seeded in n.target.tags for n in traced.graph.nodes):
            seed_random_ops(traced, fake_mode)
    outputs = next(n for n in traced.graph.nodes if n.op == "output").args[0]
    for out in outputs:
        val = out.meta.get("val") if isinstance(out, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            raise CompileError(f"graph output is not a tensor: {type(val).__name__}")
    traced.meta["writes_inputs"] = writes
    return traced, fake_mode, shape_env, fakes, bindings_and_checks, len(outputs)


def _check_no_output_aliases(traced, fakes):
    """Functionalization turns views into copies; an output that is a view of an input (or
    of another output) must stay one, so such graphs take Inductor's own path. Read off the
    first, unfunctionalized trace: its output values are the fakes the ops returned."""
    from torch.multiprocessing.reductions import StorageWeakRef

    from eagerc._compiler import CompileError

    outputs = next(n for n in traced.graph.nodes if n.op == "output").args[0]
    seen = {StorageWeakRef(t.untyped_storage()) for t in fakes}
    for out in outputs:
        val = out.meta.get("val") if isinstance(out, torch.fx.Node) else None
        if isinstance(val, torch.Tensor):
            ref = StorageWeakRef(val.untyped_storage())
            if ref in seen:
                raise CompileError("a graph output aliases an input or another output")
            seen.add(ref)


def _mutates(node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable


def _for_cpu_target(gm):
    """A copy of `gm` whose device arguments (factories, `.to(...)`) name the CPU instead of
    the eagerc device: the CPU target allocates there, and the runtime hands CPU outputs
    back as eagerc tensors over the same memory."""
    import copy

    def to_cpu(v):
        if isinstance(v, torch.device) and v.type == "eagerc":
            return torch.device("cpu")
        if isinstance(v, str) and v.split(":")[0] == "eagerc":
            return "cpu"
        return v

    gm = copy.deepcopy(gm)
    for node in gm.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, to_cpu)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, to_cpu)
    gm.recompile()
    return gm
