"""A captured FX graph -> a :class:`~eagerc.compile.trace.Traced` ATen graph.

eagerc.capture records one torch.fx graph per record. It is traced to ATen over fake inputs
of one ShapeEnv (the dims in `dynamic_dims` symbolic, the others static; functionalized
only when it writes into a tensor; Inductor's decompositions), then built like one op
(inductor_wrapper.py). Tensor constants made while tracing become trailing inputs.
Graphs this path does not take (an output aliasing an input, a graph that does not trace)
raise CompileError; capture then compiles them with Inductor's own compile_fx.
"""
from __future__ import annotations

import copy

import torch

import _eagerc as _C
from eagerc.refusals import CompileError, error_summary
from eagerc.compile.guard_source import bind_symbols
from eagerc.compile.lock import compile_lock
from eagerc.compile.trace import Traced, fake_input, seed_random_ops


def trace_graph(gm, example_inputs, dynamic_dims, target) -> Traced:
    """`gm` as a functional ATen graph for `target`, over fakes of `example_inputs`."""
    if target.device != target.home:
        gm = _retarget_devices(gm, target)
        example_inputs = target.standins(example_inputs)
    try:
        with compile_lock:
            traced = _trace(gm, example_inputs, dynamic_dims)
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - any tracing failure: the graph takes another path
        raise CompileError(f"tracing failed: {error_summary(e)}") from e
    _lift_constants(traced)
    return traced


def _trace(gm, example_inputs, dynamic_dims) -> Traced:
    from torch._dispatch.python import enable_python_dispatcher
    from torch._dynamo.source import LocalSource
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # No duck sizing: sizes equal by coincidence in this run stay separate symbols.
    shape_env = ShapeEnv(duck_shape=False)
    fake_mode = FakeTensorMode(shape_env=shape_env)
    fakes = [fake_input(fake_mode, t, dims, LocalSource(f"input{k}"))
             for k, (t, dims) in enumerate(zip(example_inputs, dynamic_dims))]
    layout = _C._tensor_inputs_layout([t.dim() for t in example_inputs])
    # Bind the symbols before tracing: once tracing proves two of them equal, the fakes
    # report the replacement, and the guard must still read every original symbol.
    bindings, checks = bind_symbols(list(zip(layout, fakes)))
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
    return Traced(traced, fake_mode, shape_env, fakes, bindings, checks, len(outputs),
                  writes_inputs=writes)


def _lift_constants(traced: Traced) -> None:
    """Tensor constants made while tracing (`torch.tensor(...)` in the program) become extra
    trailing inputs: the artifact then needs no constant table, and they are stored with it.
    Their guard slots are checked like any static input's."""
    gm = traced.gm
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    if not attrs:
        return
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    for node in attrs:
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            raise CompileError(f"graph attribute {node.target} is a {type(value).__name__}")
        with gm.graph.inserting_before(first):
            ph = gm.graph.placeholder(f"const{len(traced.constants)}")
        fake = traced.fake_mode.from_tensor(value, static_shapes=True)
        ph.meta["val"] = fake
        node.replace_all_uses_with(ph)
        gm.graph.erase_node(node)
        delattr(gm, node.target)
        traced.constants.append(value.detach().clone())
        traced.fakes.append(fake)
    gm.recompile()
    layout = _C._tensor_inputs_layout([f.dim() for f in traced.fakes])
    n_consts = len(traced.constants)
    _, const_checks = bind_symbols(list(zip(layout[-n_consts:], traced.fakes[-n_consts:])))
    traced.checks.extend(const_checks)


def _check_no_output_aliases(traced, fakes):
    """Functionalization turns views into copies; an output that is a view of an input (or
    of another output) must stay one, so such graphs take Inductor's own path. Read off the
    first, unfunctionalized trace: its output values are the fakes the ops returned."""
    from torch.multiprocessing.reductions import StorageWeakRef

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


def _retarget_devices(gm, target):
    """A copy of `gm` whose device arguments (factories, `.to(...)`) name the code
    generator's device instead of the served one: the target allocates there, and the
    runtime hands its outputs back as tensors of the served device over the same memory."""
    def swap(v):
        if isinstance(v, torch.device) and v.type == target.device:
            return target.home_device(v)
        if isinstance(v, str) and v.split(":")[0] == target.device:
            return str(target.home_device(torch.device(v)))
        return v

    gm = copy.deepcopy(gm)
    for node in gm.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, swap)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, swap)
    gm.recompile()
    return gm
