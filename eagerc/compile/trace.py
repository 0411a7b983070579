"""Op + call -> a traced ATen graph over fake inputs (:class:`Traced`).

Sizes are fresh symbols (no duck sizing: two sizes equal by coincidence at the first call
stay separate), ints are lifted as SymInts, floats as 0-dim float64 tensors read with
``.item()`` inside the graph (Inductor's C++ wrapper cannot take a SymFloat input).
Which argument becomes which runtime input, and where its guard values go, is C++'s layout
(``eagerc._C.RuntimeSlot``, csrc/runtime_layout.h): nothing here recomputes that order.
"""
from __future__ import annotations

import dataclasses

import torch

from eagerc.aten_meta import callable_for
from eagerc.compile.output_strides import match_eager_strides
from eagerc.refusals import CompileError


@dataclasses.dataclass
class Traced:
    """A functional ATen graph ready for Inductor, and what its guard must check."""

    gm: torch.fx.GraphModule
    fake_mode: object            # the FakeTensorMode the graph was traced in
    shape_env: object            # its ShapeEnv: the assumptions made while tracing
    fakes: list                  # the graph's example inputs (fake tensors, SymInts)
    bindings: dict               # symbol name -> ("i"|"f", guard slot)
    checks: list                 # (guard slot, expr) pairs and sympy booleans
    num_outputs: int
    writes_inputs: bool = False  # graphs: the graph writes into an input
    constants: list = dataclasses.field(default_factory=list)  # graphs: lifted tensor constants


def fake_input(fake_mode, t, dynamic_dims, source):
    """A fake of tensor `t` whose dims in `dynamic_dims` are fresh size symbols (strides
    inferred from them), the others static."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    ctx = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if d in dynamic_dims else DimDynamic.STATIC
                       for d in range(t.dim())],
        dynamic_strides=[DimDynamic.INFER_STRIDE] * t.dim())
    return fake_mode.from_tensor(t, symbolic_context=ctx, source=source)


def seed_random_ops(gm, fake_mode) -> None:
    """Random ops lower only after Inductor's seed pass (compile_fx runs it for whole
    graphs; compile_fx_inner, which eagerc calls, does not)."""
    from torch._inductor.fx_passes.replace_random import replace_random_passes
    from torch._inductor.virtualized import V

    with V.set_fake_mode(fake_mode):
        replace_random_passes(gm)


def runtime_values(args, layout) -> list:
    """The call's runtime inputs, in the order of `layout`."""
    return [args[s.arg] if s.item is None else args[s.arg][s.item] for s in layout]


def _fake_runtime_inputs(args, layout):
    """Fakes for the runtime inputs; returns (fake_mode, shape_env, fakes, bindings, checks)."""
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    shape_env = ShapeEnv(duck_shape=False, allow_scalar_outputs=True)
    fake_mode = FakeTensorMode(shape_env=shape_env)
    fakes = []
    for k, (slot, value) in enumerate(zip(layout, runtime_values(args, layout))):
        source = LocalSource(f"input{k}")
        if slot.kind == "tensor":
            fakes.append(fake_input(fake_mode, value, range(value.dim()), source))
        elif slot.kind == "int":
            sym = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
            fakes.append(shape_env.create_symintnode(sym, hint=value, source=source))
        else:
            fakes.append(fake_mode.from_tensor(torch.tensor(float(value), dtype=torch.float64)))
    # Bind the symbols now: once tracing proves two of them equal, the fakes report the
    # replacement, and the guard must still bind every original symbol. (Imported here:
    # guard_source imports sympy, ~0.5 s, and the miss path imports this module for
    # split_call even when the kernel comes from disk.)
    from eagerc.compile.guard_source import bind_symbols

    bindings, checks = bind_symbols(list(zip(layout, fakes)))
    return fake_mode, shape_env, fakes, bindings, checks


def _rebuild_call(op, args, layout, values):
    """The op's args and kwargs with runtime inputs replaced by `values`."""
    full = [list(a) if isinstance(a, (list, tuple)) else a for a in args]
    for slot, v in zip(layout, values):
        if slot.item is None:
            full[slot.arg] = v
        else:
            full[slot.arg][slot.item] = v
    return split_call(op, full)


def split_call(op, args):
    """The schema-ordered `args` of `op` as (positional, keyword) for calling it."""
    pos, kw = [], {}
    for arg, v in zip(op._schema.arguments, args):
        if arg.kwarg_only:
            kw[arg.name] = v
        else:
            pos.append(v)
    return pos, kw


def _clamp(x, min=None, max=None):
    """aten.clamp with eager's promotion for lifted scalars. Inductor's decomposition
    (torch 2.13) promotes over (Tensor, int, float, bool) only, so a lifted clamp bound
    (a SymFloat) was left out: int64 [1, 5].clamp(max=2.5) came back int64 [1, 2] where
    eager gives float32 [1.0, 2.5]; a bool tensor clamped by an int stayed bool."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    bounds = [b for b in (min, max) if b is not None]
    compute, result = elementwise_dtypes(x, *bounds, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    x = x.to(compute)
    if min is not None:
        x = torch.ops.aten.clamp_min.default(x, min)
    if max is not None:
        x = torch.ops.aten.clamp_max.default(x, max)
    return x.to(result)


# Decompositions that replace Inductor's where it gets a lifted scalar's promotion wrong.
_LIFTED_SCALAR_DECOMPOSITIONS = {torch.ops.aten.clamp.default: _clamp}

# Reductions whose out= dtype, when `dtype` is None, is the dtype eager computes in
# (ATen's infer_dtype_from_optional): sum(float_x, 1, out=int64_out) sums the elements
# cast to int64. The graph is traced with dtype=out.dtype so it does the same; out's
# dtype is in the signature. (Checked against eager by tests/test_promotion.py and tools/op_sweep.py.)
_OUT_DTYPE_COMPUTES = frozenset({"aten::sum.IntList_out", "aten::nansum.out", "aten::prod.int_out",
                                 "aten::mean.out", "aten::nanmean.out", "aten::cumsum.out",
                                 "aten::cumprod.out"})


def computes_in_out_dtype(op, args) -> bool:
    """A reduction whose out= dtype (dtype=None) is the dtype it computes in."""
    if f"{op._schema.name}.{op._schema.overload_name}" not in _OUT_DTYPE_COMPUTES:
        return False
    names = [a.name for a in op._schema.arguments]
    return args[names.index("dtype")] is None and isinstance(args[names.index("out")], torch.Tensor)


def _with_out_dtype(op, args):
    """`args` with dtype=out.dtype for a reduction whose out= dtype is its computation's."""
    if not computes_in_out_dtype(op, args):
        return args
    names = [a.name for a in op._schema.arguments]
    i, o = names.index("dtype"), names.index("out")
    args = list(args)
    args[i] = args[o].dtype
    return args


def _decompositions(also, own: dict) -> dict:
    from torch._decomp import decomposition_table
    from torch._inductor.decomposition import select_decomp_table
    # Some of Inductor's decompositions (max_pool2d_with_indices) read
    # torch._inductor.lowering, which only Inductor's compile imports: a process whose first
    # compile is such an op failed to trace it.
    import torch._inductor.lowering  # noqa: F401

    table = {**select_decomp_table(), **_LIFTED_SCALAR_DECOMPOSITIONS}
    if own:
        table = {**table, **own}
    return {**table, **{op: decomposition_table[op] for op in also}} if also else table


def trace_op(op, args, layout, decompose=(), own=None, eager_layouts=None) -> Traced:
    """Trace one call of `op` (an OpOverload) over fakes of its runtime inputs.

    Inductor's decompositions apply, with `own` in place of some (the code generator's:
    for host C++ eagerc's few CPU ones, codegen/cpp/cpu_decompositions.py), and torch._decomp's
    for the ops in `decompose` (ops Inductor would otherwise hand back to ATen).
    `eager_layouts`: the sizes and strides of eager's outputs for this call, whose strides
    at size-1 dims the outputs take (eagerc/compile/output_strides.py).
    """
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode, shape_env, fakes, bindings, checks = _fake_runtime_inputs(args, layout)
    args = _with_out_dtype(op, args)
    schema = op._schema
    # Returns that alias a mutated argument are returned by the holder as that argument;
    # the graph's outputs are the fresh ones.
    fresh = [i for i, ret in enumerate(schema.returns) if ret.alias_info is None]
    mutates = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    returns_list = len(schema.returns) == 1 and isinstance(schema.returns[0].type, torch._C.ListType)
    float_inputs = [k for k, slot in enumerate(layout) if slot.kind == "float"]

    def call(*values):
        values = list(values)
        for k in float_inputs:
            values[k] = values[k].item()
        pos, kw = _rebuild_call(op, args, layout, values)
        out = callable_for(op, [*pos, *kw.values()])(*pos, **kw)
        if returns_list:
            return tuple(out)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(outs[i] for i in fresh)

    fn = call
    if mutates:
        # Functionalize: the op becomes its functional form plus copy_ into the
        # mutated inputs, which Inductor fuses into one kernel writing in place.
        fn = torch.func.functionalize(call, remove="mutations_and_views")
    # The Python dispatcher lets meta functions with symbolic sizes (expand in
    # addcmul's broadcasting) take their SymInt-aware Python paths.
    with fake_mode, enable_python_dispatcher():
        gm = make_fx(fn, decomposition_table=_decompositions(decompose, own or {}), tracing_mode="real")(*fakes)
        if torch.Tag.nondeterministic_seeded in op.tags:
            seed_random_ops(gm, fake_mode)
    _refuse_resized_inputs(gm)
    match_eager_strides(gm, eager_layouts)
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    for out in outputs:
        val = out.meta.get("val") if hasattr(out, "meta") else None
        if isinstance(val, torch.Tensor) and (val.layout != torch.strided or val.is_quantized
                                              or val._is_zerotensor()):
            raise CompileError(f"the output is not a plain strided tensor ({val.layout}"
                               f"{', a ZeroTensor' if val._is_zerotensor() else ''})")
        if isinstance(val, torch.Tensor) and val.is_complex():
            # Inductor writes complex results through view_as_real aliases of an empty
            # buffer and (torch 2.13) drops those writes: complex(a, b) came back as
            # garbage. Complex inputs are refused by the signature already.
            raise CompileError(f"a complex output ({val.dtype})")
    return Traced(gm, fake_mode, shape_env, fakes, bindings, checks, len(outputs))


def _refuse_resized_inputs(gm) -> None:
    """An out= argument the call must still resize is left to eager's kernel: Inductor's
    wrapper for resize_(input) then copy_ into it resizes the input and drops the copy (and
    torch 2.11-2.13 emit that resize_ shim call with one argument too many, which no
    compiler accepts). The holder resizes outs as eager would before it looks up a kernel
    (csrc/out_forms.cpp: arange, eye, linspace into an empty out; any out= op through its
    Meta kernel), so a traced call has outs of the result's shape; what still gets here is
    an out on host aliases (resizing an alias would not resize the device's tensor)."""
    resizes = (torch.ops.aten.resize_.default, torch.ops.aten.resize_as_.default)
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in resizes and node.args \
                and getattr(node.args[0], "op", None) == "placeholder":
            raise CompileError(f"an out= argument this call must resize ({node.target.__name__} of an input)")
