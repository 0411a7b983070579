"""Planning a record's guard: which objects the run reached are resolved, how (access
paths from the arguments, the called object, globals and closures) and what is checked of
each, split into the full guard and its fast path (record_source.py turns the plan into
source; version_guard.py decides which of the two runs).
"""
import collections
import types

import torch

from .guards import is_literal, access, check_source, value_differs
from .mock import IMMUTABLE_TYPES


class GuardPlan:
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
        self.sites = {}  # guard variable -> "file:line" where the run first read it, or None


def plan_guard(mon, nodes, consts, rp):
    g = mon.graph
    plan = GuardPlan()
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
                if not isinstance(child.obj, IMMUTABLE_TYPES):
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
            plan.sites[var] = g.sites.get((holder.node_id, rel))  # for guard_failures
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
                if holder.node_id and hdict is None and (
                        hsnap[0] not in ("is", "eq") or isinstance(holder.obj, type)) and \
                        not isinstance(holder.obj, tuple):
                    # no dict version covers this reference: check it is still the same (a
                    # class is checked by identity, but its attributes can still change)
                    op = "!=" if isinstance(child.obj, IMMUTABLE_TYPES) else "is not"
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
                if kind == "arg" or snap[0] == "array":  # (no dict version covers contents)
                    plan.fast.append(f"if {cond}: return None")
            else:
                plan.tensors.append((var, snap[1]))
                plan.strides.append(child.node_id in placeholder_ids or
                                    child.node_id in mon.stride_nodes)
                for name, value in mon.value_guards.get(child.node_id, ()):
                    # a value Python read (`if self.initted:`): no dict version covers it
                    line = (f"if {consts.add(value_differs)}({var}, {name!r}, "
                            f"{consts.add(value)}): return None")
                    plan.full.append(line)
                    plan.fast.append(line)
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
    return repr(key) if is_literal(key) else consts.add(key)


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
