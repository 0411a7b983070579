"""Building a record (paper §2.2) from one finished monitor run.

`build_record` turns a finished `Monitor` into a `Record`: Algorithm 1 on its RefGraph gives
guard and mock nodes, both become generated straight-line Python functions (a flat list of
checks; no interpretation at call time; guard_plan.py, record_source.py), and the operator
graph is compiled as a unit. A run whose capture stopped gives an eager record: its guard
covers what the run read up to the stop, and a hit runs the function eagerly without
monitoring it again.
"""
import torch

from . import numpy_ops, replayed_updates, speculate
from .graph_compiler import order_dependent
from .guard_plan import plan_guard
from .guards import Consts
from .mock import CannotMock, MockBuilder, materialize_final
from .object_facts import qualname
from .op_recorder import DrawInput, build_module
from .record_source import make_record
from .refgraph import Relation
from .symbolic import bake_all
from .training import needs_autograd


def build_record(mon, result, compiler, symbolic=False):
    """A Record for the finished monitor run `mon` that returned `result`, its graph
    compiled by `compiler` (graph_compiler.GraphCompiler).

    `symbolic`: a run with symbolic shapes (§6.2.1), compiled by
    `compiler.compile_symbolic(gm, examples, dynamic_dims) -> (fn, shape_ok)`:
    `dynamic_dims[i]` lists the dims of graph input i compiled as symbolic sizes,
    `shape_ok(inputs)` evaluates the guards the compilation produced.
    """
    g = mon.graph
    spec = mon.recorder.speculated
    rec = mon.recorder
    if mon.stopped is None and numpy_ops.aliases_changed(rec):
        mon.stop(numpy_ops.aliases_changed(rec))
    undo = speculate.undo_inputs(rec) if rec.outside_write or rec.random else []
    if spec and mon.stopped is None and undo is None:
        # the graph would write or draw before the values are checked, in a way the mock
        # cannot undo on a miss (speculate.py)
        mon.stop(speculate.stop_reason(spec[0][1]))
    if mon.stopped is None:
        g.write(g.root, Relation("return"), result)
        try:
            materialize_final(g)
        except CannotMock as e:
            mon.stop(f"cannot mock: {e}", e.site)
    if mon.stopped is None and mon.drawn:
        _drawn_kept(mon)
        if mon.symbolic:
            # SymbolicInts in the final state (the return value, state stored outside) are
            # rebuilt by the mock as the constants they were: their values get guarded.
            for node in g.sn[1:]:
                bake_all((node.obj,), 1)
    consts = Consts()
    rp = (replayed_updates.plan(mon) if mon.stopped is None
          else replayed_updates.Plan({}, set(), {}, {}))
    plan = plan_guard(mon, g.guard_nodes(), consts, rp)
    if mon.stopped is not None:
        return make_record(mon, plan, [], consts, None, None, set())
    returned = set(plan.var_of)
    out_slots = []  # guard slots the mock reads, in order

    def slot_of(node_id):
        if node_id not in returned or node_id == 0:
            return None
        name = f"s{node_id}"
        if name not in out_slots:
            out_slots.append(name)
        return f"S[{out_slots.index(name)}]"

    builder = MockBuilder(g, mon.recorder, slot_of, consts, rp, mon.made_subclass_at)
    written = set()
    try:
        inputs = [f"_scalar(D[{sn.index}])" if isinstance(sn, DrawInput)
                  else f"_scalar({slot_of(sn.node_id)})" if type(sn.obj) is float
                  else slot_of(sn.node_id) for sn, _ in mon.recorder.placeholders]
        for node in g.mock_nodes():
            if node.node_id in returned:
                builder.update(node)
                if node.written or node.rewrite:
                    written.add(node.node_id)
        ret = builder.value(g.root.versions[-1].refs[Relation("return")])
    except CannotMock as e:
        mon.stop(f"cannot mock: {e}", e.site)
        return make_record(mon, plan, [], consts, None, None, set())
    gm, run_line = None, []
    if any(n.op in ("call_function", "call_method") for n in mon.recorder.graph.nodes):
        outputs = list(builder.outputs)
        expected = []  # values Python read, checked after the graph (speculate.py)
        for node, name, value in spec:
            if node not in outputs:
                outputs.append(node)
            expected.append((outputs.index(node), name, value))
        gm = build_module(mon.recorder.graph, outputs)
        examples = [_scalar(sn.obj) if type(sn.obj) is float else sn.obj
                    for sn, _ in mon.recorder.placeholders]
        consts.env["_scalar"] = _scalar
        # (a symbolic record's shape check runs in the guard, before the mock draws)
        dims = _dynamic_dims(mon, plan) if symbolic and not mon.draws else None
        with torch.set_grad_enabled(mon.grad_mode):
            if dims and (needs_autograd(examples) or order_dependent(gm)):
                dims = None  # training records (and graphs run as recorded) are static
            if dims and any(dims):
                try:
                    consts.env["_run"], consts.env["_shape_ok"] = compiler.compile_symbolic(
                        gm, examples, dims)
                except Exception:  # noqa: BLE001 - e.g. an op without symbolic support
                    mon.symbolic_failed = True
                    dims = None
            if dims and any(dims):
                plan.dynamic = {f"s{sn.node_id}": d
                                for (sn, _), d in zip(mon.recorder.placeholders, dims) if d}
                g_in = [f"_scalar(s{sn.node_id})" if type(sn.obj) is float
                        else f"s{sn.node_id}" for sn, _ in mon.recorder.placeholders]
                plan.shape_line = f"if not _shape_ok(({', '.join(g_in)},)): return None"
            else:
                consts.env["_run"] = compiler.compile(gm, examples)
        run_line = [f"O = _run({', '.join(inputs)})"]
        if expected:
            consts.env["_checked_run"] = speculate.run
            consts.env["_check_values"] = speculate.check
            consts.env["_expected"] = tuple(expected)
            run_line = [f"O = _checked_run(_run, {', '.join(inputs)})",
                        "_check_values(O, _expected)"]
            if undo or rec.random:  # what the graph writes or draws, to undo on a miss
                consts.env["_save"] = speculate.save
                run_line = [f"U = _save(({''.join(inputs[i] + ', ' for i in undo)}), "
                            f"{rec.random})",
                            f"O = _checked_run(_run, {', '.join(inputs + ['undo=U'])})",
                            "_check_values(O, _expected, U)"]
    draw_line = [_draw_line(mon, consts)] if mon.draws else []
    mock_lines = draw_line + builder.prelude + run_line + builder.lines + [f"return {ret}"]
    return make_record(mon, plan, out_slots, consts, mock_lines, gm, written)


def _draw_line(mon, consts):
    """The mock's first line: the run's host random draws again, in its order, with the
    same arguments (`D = (_c3(), _c4(0.5, 1.5))`): the stream advances as in eager and
    the graph takes the new numbers (Monitor._draw)."""
    calls = [f"{consts.add(fn)}({''.join(consts.add(a) + ', ' for a in args)})"
             for fn, args, _ in mon.draws]
    return f"D = ({''.join(c + ', ' for c in calls)})"


def _drawn_kept(mon):
    """A drawn number left in the final state (returned, stored on a module) would be
    the mock's constant: capture stops there."""
    for node in mon.graph.sn:
        for child in node.versions[-1].refs.values():
            fn = mon.drawn.get(id(child.obj)) if type(child.obj) is float else None
            if fn is not None:
                mon.stop(f"host random number kept after the call: {qualname(fn)}")
                return


def _dynamic_dims(mon, plan):
    """Per graph input, the dims compiled as symbolic sizes: those of tensors reached from the
    call's arguments (module state such as parameters keeps its shapes), of size >= 2 (0 and 1
    stay specialized, as in Dynamo), that the program never read (a size read by Python code
    may have been baked into the graph or steered control flow), of tensors whose strides the
    program did not read."""
    rec = mon.recorder
    out = []
    for sn, _ in rec.placeholders:
        t = sn.obj
        if (not isinstance(t, torch.Tensor) or plan.origin.get(sn.node_id) != "arg"
                or sn.node_id in mon.stride_nodes):
            out.append([])
            continue
        out.append([d for d in range(t.dim())
                    if t.shape[d] >= 2 and (sn.node_id, d) not in rec.specialized])
    return out


def _scalar(value):
    """A lifted float as the 0-d tensor the compiled graph takes (a Python float input would
    be specialized by the compiler)."""
    return torch.tensor(value, dtype=torch.float64)
