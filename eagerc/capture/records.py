"""Records (paper §2.2): a guard, a mock and an operator graph made from one monitor run.

`build_record` turns a finished `Monitor` into a `Record`: Algorithm 1 on its RefGraph gives
guard and mock nodes, both become generated straight-line Python functions (a flat list of
checks; no interpretation at call time), and the operator graph is compiled as a unit.
A run whose capture stopped gives an eager record: its guard covers what the run read up to
the stop, and a hit runs the function eagerly without monitoring it again.
"""
import collections
import functools
import re
import types

import torch

from . import replayed_updates, speculate
from .op_recorder import build_module
from .guards import Consts, access, check_source, grad_mode, tensor_guard
from .mock import _IMMUTABLE, CannotMock, MockBuilder, materialize_final
from .refgraph import Relation
from .symbolic import bake_all
from .training import needs_autograd


class Record:
    """guard(args, kwargs) -> slots or None; mock(slots) -> the call's result."""

    def __init__(self, guard, mock=None, graph_module=None, stop_reason=None, source=""):
        self.guard = guard
        self.mock = mock
        self.graph_module = graph_module
        self.stop_reason = stop_reason
        self.source = source  # the generated guard and mock, for debugging
        # An eager record of a run the program ended with an exception (api.Captured).
        self.raised = False
        # Of an eager record: its hits' op stream cut into compiled segments (stream.py);
        # None: not recorded yet, False: none (failed, or nothing to compile).
        self.stream = None
        self.stream_recordings = 0
        self._full = None  # (checks of the full guard, its namespace), for why_not
        self._why_not = None

    def why_not(self, args, kwargs):
        """The first check of this record's guard that fails on (args, kwargs), as its
        source with guard variables spelled as access paths (`args[0].mode != 'a'`); None
        if the guard passes. For reports of misses (`capture_stats`' guard_failures)."""
        if self._why_not is None:
            self._why_not = _explainer(*self._full)
        return self._why_not(args, kwargs)

    @property
    def eager(self):
        return self.mock is None


class RecordCache:
    """Records of one function, most recently matched first (paper §6.1)."""

    def __init__(self):
        self.records = []

    def match(self, args, kwargs):
        for i, rec in enumerate(self.records):
            slots = rec.guard(args, kwargs)
            if slots is not None:
                if i:
                    self.promote(rec)
                return rec, slots
        return None, None

    def promote(self, record):
        """`record` matched a call: it is tried first next time (if it is still held)."""
        if record in self.records:
            self.records.remove(record)
            self.records.insert(0, record)

    def add(self, record):
        self.records.insert(0, record)

    def remove(self, record):
        if record in self.records:
            self.records.remove(record)

    def __len__(self):
        return len(self.records)


def build_record(mon, result, compile_graph, compile_symbolic=None):
    """A Record for the finished monitor run `mon` that returned `result`.

    `compile_symbolic(gm, examples, dynamic_dims) -> (fn, shape_ok)`, given for a run with
    symbolic shapes (§6.2.1): `dynamic_dims[i]` lists the dims of graph input i compiled as
    symbolic sizes, `shape_ok(inputs)` evaluates the guards the compilation produced.
    """
    g = mon.graph
    spec = mon.recorder.speculated
    if spec and mon.stopped is None and (mon.recorder.outside_write or mon.recorder.random):
        # the graph would write or draw before the values are checked (speculate.py)
        mon.stop(f"tensor value read: Tensor.{spec[0][1]}")
    if mon.stopped is None:
        g.write(g.root, Relation("return"), result)
        try:
            materialize_final(g)
        except CannotMock as e:
            mon.stop(f"cannot mock: {e}")
        if mon.symbolic:
            # SymbolicInts in the final state (the return value, state stored outside) are
            # rebuilt by the mock as the constants they were: their values get guarded.
            for node in g.sn[1:]:
                bake_all((node.obj,), 1)
    consts = Consts()
    rp = (replayed_updates.plan(mon) if mon.stopped is None
          else replayed_updates.Plan({}, set(), {}, {}))
    plan = _plan_guard(mon, g.guard_nodes(), consts, rp)
    if mon.stopped is not None:
        return _make(mon, plan, [], consts, None, None, set())
    returned = set(plan.var_of)
    out_slots = []  # guard slots the mock reads, in order

    def slot_of(node_id):
        if node_id not in returned or node_id == 0:
            return None
        name = f"s{node_id}"
        if name not in out_slots:
            out_slots.append(name)
        return f"S[{out_slots.index(name)}]"

    builder = MockBuilder(g, mon.recorder, slot_of, consts, rp)
    written = set()
    try:
        inputs = [f"_scalar({slot_of(sn.node_id)})" if type(sn.obj) is float
                  else slot_of(sn.node_id) for sn, _ in mon.recorder.placeholders]
        for node in g.mock_nodes():
            if node.node_id in returned:
                builder.update(node)
                if node.written or node.rewrite:
                    written.add(node.node_id)
        ret = builder.value(g.root.versions[-1].refs[Relation("return")])
    except CannotMock as e:
        mon.stop(f"cannot mock: {e}")
        return _make(mon, plan, [], consts, None, None, set())
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
        dims = _dynamic_dims(mon, plan) if compile_symbolic is not None else None
        with torch.set_grad_enabled(mon.grad_mode):
            if dims and needs_autograd(examples):
                dims = None  # training records are compiled for static shapes
            if dims and any(dims):
                try:
                    consts.env["_run"], consts.env["_shape_ok"] = compile_symbolic(
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
                consts.env["_run"] = compile_graph(gm, examples)
        run_line = [f"O = _run({', '.join(inputs)})"]
        if expected:
            consts.env["_checked_run"] = speculate.run
            consts.env["_check_values"] = speculate.check
            consts.env["_expected"] = tuple(expected)
            run_line = [f"O = _checked_run(_run, {', '.join(inputs)})",
                        "_check_values(O, _expected)"]
    mock_lines = builder.prelude + run_line + builder.lines + [f"return {ret}"]
    return _make(mon, plan, out_slots, consts, mock_lines, gm, written)


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


class _GuardPlan:
    """Guard statements, split by whether they depend on the call's arguments.

    `full` resolves and checks everything. `fast` is what still has to run when every
    versioned dict of the static part (state reached from the called object, globals and
    closures) is unchanged since the last full pass: argument checks, aliasing checks and
    identity checks of static references no dict version covers (lists, cells, slots).
    """

    def __init__(self):
        self.full, self.fast = [], []
        self.var_of = {}  # node_id -> variable name
        self.static = []  # variables of the static part, in resolution order
        self.versioned = []  # (variable, expression of the dict whose version covers it)
        self.tensors, self.strides = [], []
        self.origin = {}  # node_id -> "arg" | "static"
        self.dynamic = {}  # guard variable of a symbolic graph input -> its symbolic dims
        self.shape_line = None  # the check of the compiled graph's shape guards


def _plan_guard(mon, nodes, consts, rp):
    g = mon.graph
    plan = _GuardPlan()
    head = [f"if len(args) != {len(mon.args)} or len(kwargs) != {len(mon.kwargs)}: "
            "return None",
            f"if _grad() is not {mon.grad_mode}: return None"]
    plan.full += head
    plan.fast += head
    plan.var_of[0] = "None"
    origin = plan.origin
    origin[0] = "static"
    placeholder_ids = {sn.node_id for sn, _ in mon.recorder.placeholders}
    queue = [g.root]
    while queue:
        holder = queue.pop(0)
        hvar = plan.var_of[holder.node_id]
        hdict = _version_source(holder, hvar, mon)
        # An append-only list (replayed_updates.py): its type is checked, not its length or items; a
        # dict used only by key: the keys it read.
        refs = {} if holder.node_id in rp.lists else holder.versions[0].refs
        reads = rp.dicts.get(holder.node_id)
        if reads is not None:
            refs = {r: c for r, c in refs.items() if reads.get(r.key)}
            for k in sorted((k for k, present in reads.items() if not present), key=repr):
                line = f"if {_key_source(k, consts)} in {hvar}: return None"
                plan.full.append(line)
                if origin[holder.node_id] == "arg":
                    plan.fast.append(line)
        for rel, child in refs.items():
            type_only = (holder.node_id, rel) in rp.type_only or child.node_id in rp.lists \
                or child.node_id in rp.dicts
            expr = access(hvar, rel, holder.obj, child.obj, consts)
            if child.node_id in plan.var_of:
                if not isinstance(child.obj, _IMMUTABLE):
                    line = f"if {expr} is not {plan.var_of[child.node_id]}: return None"
                    plan.full.append(line)
                    plan.fast.append(line)
                elif rel.kind != "const":
                    # One node stands for equal small ints, interned strings ...: each
                    # further path to it needs its own value check.
                    snap = mon.snapshots.get(child.node_id)
                    if type_only:
                        snap = ("type", type(child.obj))
                    cond = check_source("_v", snap, consts, None) if snap else None
                    if cond is not None:
                        line = f"_v = {expr}\n        if {cond}: return None"
                        plan.full.append(line)
                        if origin[holder.node_id] == "arg":
                            plan.fast.append(line)
                        elif hdict is None and holder.node_id:
                            plan.fast.append(line)
                continue
            var = plan.var_of[child.node_id] = f"s{child.node_id}"
            kind = "arg" if rel.kind in ("args", "kw") or origin[holder.node_id] == "arg" \
                else "static"
            origin[child.node_id] = kind
            queue.append(child)
            plan.full.append(f"{var} = {expr}")
            if kind == "arg":
                plan.fast.append(f"{var} = {expr}")
            else:
                plan.static.append(var)
                hsnap = mon.snapshots.get(holder.node_id, ("const",))
                if holder.node_id and hdict is None and hsnap[0] not in ("is", "eq") and \
                        not isinstance(holder.obj, tuple):
                    # no dict version covers this reference: check it is still the same
                    op = "!=" if isinstance(child.obj, _IMMUTABLE) else "is not"
                    plan.fast.append(f"if {expr} {op} {var}: return None")
            if rel.kind == "const" or child.node_id in mon.lazy:
                continue
            snap = mon.snapshots.get(child.node_id)
            if snap is None:
                continue
            if type_only:  # replayed (replayed_updates.py): the mock recomputes from the value
                snap = ("type", type(child.obj))
            cond = check_source(var, snap, consts, plan.strides)
            if cond is not None:
                plan.full.append(f"if {cond}: return None")
                if kind == "arg":
                    plan.fast.append(f"if {cond}: return None")
            else:
                plan.tensors.append((var, snap[1]))
                plan.strides.append(child.node_id in placeholder_ids or
                                    child.node_id in mon.stride_nodes)
        if hdict is not None and holder.node_id and origin[holder.node_id] == "static":
            plan.versioned.append((holder.node_id, hdict))
        for name in sorted(mon.absent.get(holder.node_id, ())):
            if holder.node_id:
                target = hvar if isinstance(holder.obj, dict) else f"{hvar}.__dict__"
                line = f"if {name!r} in {target}: return None"
                plan.full.append(line)
                if origin[holder.node_id] == "arg":
                    plan.fast.append(line)
    return plan


def _key_source(key, consts):
    from .guards import _literal
    return repr(key) if _literal(key) else consts.add(key)


def _version_source(node, var, mon):
    """Expression of the dict whose version tag covers `node`'s references, or None."""
    obj = node.obj
    if node.node_id == 0:
        return None
    if type(obj) in (dict, collections.OrderedDict):
        return var
    if isinstance(obj, dict):
        return None  # a subclass may keep state outside its items
    if isinstance(obj, (list, set, tuple, types.CellType)) or isinstance(obj, torch.Tensor):
        return None
    d = getattr(obj, "__dict__", None)
    if type(d) is dict and all(r.kind == "attr" and (r.key in d or r.key == "__dict__")
                               for r in node.versions[0].refs):
        return f"{var}.__dict__"
    return None


def _make(mon, plan, out_slots, consts, mock_lines, gm, written):
    env = dict(consts.env)
    env["_grad"] = grad_mode
    env["_getattr"] = getattr
    full, fast = list(plan.full), list(plan.fast)
    if plan.tensors:
        env["_tg"] = tensor_guard([t for _, t in plan.tensors], plan.strides,
                                  [plan.dynamic.get(v, ()) for v, _ in plan.tensors])
        tg = f"if not _tg.check({', '.join(v for v, _ in plan.tensors)}): return None"
        full.append(tg)
        fast.append(tg)
    if plan.shape_line:
        full.append(plan.shape_line)
        fast.append(plan.shape_line)
    ret = f"({', '.join(out_slots)}{',' if out_slots else ''})"
    static = ", ".join(plan.static) + ("," if plan.static else "")
    # The fast path unpacks only the static variables it reads (a large model has hundreds;
    # unpacking them all cost ~2 us per call).
    words = set(re.findall(r"\bs\d+\b", "\n".join(fast) + ret))
    used = [v for v in plan.static if v in words]
    used_t = ", ".join(used) + ("," if used else "")
    versioned = [(plan.var_of[n], d) for n, d in plan.versioned]
    src = ("def guard_full(args, kwargs):\n    try:\n        "
           + "\n        ".join(full)
           + f"\n        return {ret}, ({static})\n    except Exception:\n        return None\n"
           f"def guard_fast(args, kwargs, ST):\n    try:\n        ({used_t}) = ST\n        "
           + "\n        ".join(fast)
           + f"\n        return {ret}\n    except Exception:\n        return None\n"
           f"def fast_state(ST):\n    ({static}) = ST\n    return ({used_t})\n"
           f"def versioned_dicts(ST):\n    ({static}) = ST\n"
           f"    return ({', '.join(d for _, d in versioned)}{',' if versioned else ''})\n")
    if mock_lines is not None:
        src += "def mock(S):\n    " + "\n    ".join(mock_lines) + "\n"
    exec(compile(src, "<eagerc.capture record>", "exec"), env)
    # Writes of the mock to the static part change dict versions on every call: those
    # records always take the full guard.
    volatile = any(plan.var_of.get(n) in plan.static for n in written)
    guard = StaticVersionGuard(env["guard_full"], env["guard_fast"], env["fast_state"],
                               env["versioned_dicts"],
                               enabled=not volatile and _dict_version is not None)
    record = Record(guard, env.get("mock"), gm, mon.stopped, src)
    record._full = (full, env)
    return record


def _explainer(full, env):
    """(args, kwargs) -> the first of the guard checks `full` that fails, as source text
    (see Record.why_not); built only when a miss asks for it."""
    paths = {}  # guard variable -> the expression it was read by, variables resolved
    for line in full:
        m = re.fullmatch(r"(s\d+) = (.*)", line)
        if m:
            paths[m[1]] = re.sub(r"\bs\d+\b", lambda v: paths.get(v[0], v[0]), m[2])

    def spell(text):  # "if <cond>: return None" -> the condition, paths spelled out
        text = " ".join(text.split())
        value = re.fullmatch(r"_v = (.*) (if .*)", text)  # a further path's value check
        if value:
            text = re.sub(r"\b_v\b", lambda _: value[1], value[2])
        text = re.sub(r"\bs\d+\b", lambda v: paths.get(v[0], v[0]), text)
        text = re.sub(r"^if (.*): return None$", r"\1", text)
        return text if len(text) <= 300 else text[:297] + "..."

    body = []
    for i, line in enumerate(full):
        tensors = re.fullmatch(r"if not _tg\.check\((.*)\): return None", line)
        if tensors:  # which tensor, and what of it, from torch's verbose check
            names = [spell(v) for v in tensors[1].split(", ")]
            line = (f"_r = _tg.check_verbose({tensors[1]}, tensor_check_names={names!r})\n"
                    f"        if _r is not True: return str(_r)")
        body.append(f"_at = {i}\n        " + line.replace("return None",
                                                          f"return {spell(line)!r}"))
    src = ("def explain(args, kwargs):\n    _at = -1\n    try:\n        "
           + "\n        ".join(body) + "\n    except Exception as e:\n"
           "        return (type(e).__name__, _at)\n    return None\n")
    ns = dict(env)
    exec(compile(src, "<eagerc.capture guard explanation>", "exec"), ns)

    def explain(args, kwargs):
        why = ns["explain"](args, kwargs)
        if isinstance(why, tuple):  # the check raised: an attribute or key is gone
            name, at = why
            return f"{name} in: {spell(full[at]) if at >= 0 else '?'}"
        return why
    return explain


class StaticVersionGuard:
    """guard(args, kwargs) -> slots or None, skipping the static part while its dicts'
    version tags are the ones seen at the last full pass (CPython bumps a dict's version
    on every change)."""

    def __init__(self, full, fast, fast_state, versioned_dicts, enabled):
        self.full, self.fast, self.versioned_dicts = full, fast, versioned_dicts
        self.fast_state = fast_state  # the full pass's static variables -> what fast reads
        self.enabled = enabled
        self.static = None
        self.unchanged = None  # () -> bool, set by a full pass

    def __call__(self, args, kwargs):
        if self.unchanged is not None and self.unchanged():
            return self.fast(args, kwargs, self.static)
        res = self.full(args, kwargs)
        if res is None:
            return None
        slots, static = res
        if self.enabled:
            self.static = self.fast_state(static)
            self.unchanged = _versions_checker(self.versioned_dicts(static))
        return slots


def _versions_checker(dicts):
    """A no-argument function: are all `dicts` unchanged (same version tags) since now?

    Uses eagerc's `_C._DictVersions` (CPython <= 3.13), else torch's C++ guard manager (one
    dict-version leaf guard per dict, ~15 ns each) when its API is the one we know, else a
    Python loop over `dict_version` (~50 ns each).
    """
    dicts = list(dicts)
    try:
        from eagerc._C import _DictVersions  # reads the version tags directly (~1 ns each)

        return _DictVersions(dicts)
    except (ImportError, TypeError):
        pass
    try:
        from torch._dynamo.guards import GuardManagerType
        from torch._C._dynamo.guards import RootGuardManager

        root = RootGuardManager()
        for i, d in enumerate(dicts):
            m = root.list_getitem_manager(i, f"D[{i}]", d, GuardManagerType.GUARD_MANAGER)
            try:
                m.add_dict_version_guard(d, [f"D[{i}]"], None)  # torch >= 2.12: user_stack
            except TypeError:
                m.add_dict_version_guard(d, [f"D[{i}]"])
        if root.check(dicts):
            return functools.partial(root.check, dicts)
    except Exception:  # noqa: BLE001 - an API we do not know: the portable path below
        pass
    empty = tuple(d for d in dicts if not d)
    full = tuple(d for d in dicts if d)
    versions = tuple(map(_dict_version, full))
    return lambda: not any(map(len, empty)) and tuple(map(_dict_version, full)) == versions


try:
    from torch._C._dynamo.guards import dict_version as _dict_version
except ImportError:  # an older torch: always the full guard
    _dict_version = None
