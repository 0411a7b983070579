"""Mocks (paper §4.2): reproduce the final state of the monitored run without running it.

After the run, the last version of each node is read off the real objects (the run really
happened, so their state *is* the final state): the full contents of new objects and of
containers updated in place, the written attributes and keys of other objects. Algorithm 1
then gives the mock nodes, and `MockBuilder` emits Python source that
1. runs the compiled operator graph on the guard's slots,
2. applies the in-place updates of objects from outside (list contents, dict keys,
   attributes, closure cells),
3. builds the new objects that outlive the run (the return value, objects stored outside).
"""
import collections
import types

import torch

from . import numpy_ops
from .guards import access, is_literal
from .refgraph import Relation, contents, expandable
from .replayed_updates import render
from .symbolic import plain

IMMUTABLE_TYPES = (int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device,
              torch.layout, torch.memory_format, torch.Size, range, slice, type(Ellipsis),
              types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
              types.MethodDescriptorType, types.WrapperDescriptorType)


def _tuple_source(items):
    """Source of a tuple display of the expressions `items`: `()`, `(a,)`, `(a, b)`."""
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


class CannotMock(Exception):
    """The final state holds something the mock cannot rebuild; `site`: where the program
    made it ("file:line"), when known."""

    def __init__(self, message, site=None):
        super().__init__(message)
        self.site = site


def _builtin_base(cls):
    for klass in cls.__mro__:
        if klass.__module__ == "builtins" or klass is collections.OrderedDict:
            return klass
    return object


def _object_state(obj):
    """(Relation, value) pairs of a new object's final state."""
    refs = []
    if isinstance(obj, (list, tuple, dict)):
        refs += contents(obj)
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and not isinstance(obj, (types.FunctionType, type)):
        refs += [(Relation("attr", k), v) for k, v in d.items()]
    return refs


def materialize_final(graph):
    """Set the last version of reachable nodes from the real objects' final state."""
    seen, queue = {0}, [graph.root]
    while queue:
        node = queue.pop(0)
        obj = node.obj
        if node.node_id != 0 and not isinstance(obj, (torch.Tensor,) + IMMUTABLE_TYPES):
            if node.new:
                node.versions[-1].refs = {r: graph.new_node(v) for r, v in _object_state(obj)}
            elif node.rewrite:
                if not expandable(obj) and not isinstance(obj, set):
                    raise CannotMock(f"in-place update of a {type(obj).__name__}")
                node.versions[-1].refs = {r: graph.new_node(v) for r, v in contents(obj)}
        for child in node.versions[-1].refs.values():
            if child.node_id not in seen:
                seen.add(child.node_id)
                queue.append(child)


class MockBuilder:
    """Emits the mock's source. `slot_of(node_id)` names guard slots; `consts` holds objects."""

    def __init__(self, graph, recorder, slot_of, consts, replays=None, subclass_site=None):
        self.graph, self.recorder = graph, recorder
        # tensor -> "file:line" where the run made it with Tensor._make_subclass, or None
        self.subclass_site = subclass_site or (lambda tensor: None)
        self.slot_of, self.consts = slot_of, consts
        self.replays = replays  # replayed_updates.Plan: updates recomputed from current values
        self.prelude = []  # reads of replayed values, before any update
        self._sources = {}
        self.lines, self.memo = [], {}
        self.outputs = []  # fx nodes the compiled graph must return, in order
        self._out_index = {}

    def value(self, node):
        """An expression for the final value of `node`."""
        if node.node_id in self.memo:
            return self.memo[node.node_id]
        slot = self.slot_of(node.node_id)
        if slot is not None:
            return slot
        obj = plain(node.obj)  # SymbolicInts are rebuilt as ints (their values are guarded)
        if isinstance(obj, torch.Tensor):
            site = self.subclass_site(obj)
            if site is None and isinstance(obj, torch.nn.Parameter):
                raise CannotMock("a new nn.Parameter outlives the run")
            fx_node = self.recorder.node_of(obj)
            if fx_node is None:
                raise CannotMock("a tensor in the final state was not made by a torch op",
                                 site)
            idx = self._out_index.get(id(fx_node))
            if idx is None:
                idx = self._out_index[id(fx_node)] = len(self.outputs)
                self.outputs.append(fx_node)
                if site is None:
                    self._tensor_attrs(f"O[{idx}]", obj)
            if site is None:
                return f"O[{idx}]"
            # `nn.Parameter(x)` in forward: a new object of its class on every call, as in
            # eager, aliasing the graph's value of x
            name = f"n{node.node_id}"
            self.lines.append(f"{name} = {self.consts.add(torch.Tensor._make_subclass)}("
                              f"{self.consts.add(type(obj))}, O[{idx}], {obj.requires_grad})")
            self._tensor_attrs(name, obj)
            self.memo[node.node_id] = name
            return name
        if isinstance(obj, IMMUTABLE_TYPES) and type(obj) is not tuple:
            return repr(obj) if is_literal(obj) else self.consts.add(obj)
        array_node = numpy_ops.traced_node(self.recorder, obj)
        if array_node is not None:  # an ndarray of tensor data: the graph's tensor's memory
            idx = self._out_index.get(id(array_node))
            if idx is None:
                idx = self._out_index[id(array_node)] = len(self.outputs)
                self.outputs.append(array_node)
            name = f"n{node.node_id}"
            self.lines.append(f"{name} = O[{idx}].numpy()")
            self.memo[node.node_id] = name
            return name
        if not node.new:
            raise CannotMock(f"object from outside without a guard path: {type(obj).__name__}")
        refs = node.versions[-1].refs
        if isinstance(obj, tuple):
            items = _tuple_source([self.value(refs[Relation("item", i)])
                                   for i in range(len(obj))])
            expr = items if type(obj) is tuple else \
                f"{self.consts.add(tuple.__new__)}({self.consts.add(type(obj))}, {items})"
            name = f"n{node.node_id}"
            self.lines.append(f"{name} = {expr}")
            self.memo[node.node_id] = name
            return name
        if type(obj) is types.MethodType:  # `self._hook` stored by the run: bound again
            owner = self.graph.get_node_by_var(obj.__self__)
            if owner is None:
                raise CannotMock("a new method of an object the mock cannot reach")
            name = f"n{node.node_id}"
            self.lines.append(f"{name} = {self.consts.add(types.MethodType)}("
                              f"{self.consts.add(obj.__func__)}, {self.value(owner)})")
            self.memo[node.node_id] = name
            return name
        return self._new_mutable(node, obj, refs)

    def _tensor_attrs(self, expr, tensor, names=None):
        """Python attributes the run set on a tensor (`t.some_attr = 3`), set again by the
        mock on the tensor its graph returns (or on the outside tensor). Values: immutable
        constants; anything else cannot be rebuilt."""
        d = getattr(tensor, "__dict__", None) or {}
        for name in sorted(d if names is None else names):
            if name not in d:
                self.lines.append(f"{self.consts.add(object.__delattr__)}({expr}, {name!r})")
                continue
            value = plain(d[name])
            if not isinstance(value, IMMUTABLE_TYPES) or type(value) is tuple:
                raise CannotMock(f"tensor attribute {name!r} holds a {type(value).__name__}")
            v = repr(value) if is_literal(value) else self.consts.add(value)
            self.lines.append(f"{self.consts.add(object.__setattr__)}({expr}, {name!r}, {v})")

    def _new_mutable(self, node, obj, refs):
        cls = type(obj)
        base = _builtin_base(cls)
        if base not in (object, list, dict, collections.OrderedDict, set) or \
                hasattr(cls, "__slots__") and not hasattr(obj, "__dict__"):
            raise CannotMock(f"cannot rebuild a new {cls.__qualname__}")
        name = f"n{node.node_id}"
        self.memo[node.node_id] = name  # before the children: cycles refer to the name
        if cls is list or cls is dict:
            self.lines.append(f"{name} = {'[]' if cls is list else '{}'}")
        else:
            self.lines.append(f"{name} = {self.consts.add(base.__new__)}"
                              f"({self.consts.add(cls)})")
        items = [(r, self.value(child)) for r, child in refs.items()]
        elems = [v for r, v in items if r.kind == "item"]
        if isinstance(obj, list):
            self.lines.append(f"{name}.extend([{', '.join(elems)}])")
        elif isinstance(obj, dict):
            setitem = self.consts.add(base.__setitem__)
            for r, v in items:
                if r.kind == "item":
                    self.lines.append(f"{setitem}({name}, {self._key(r.key)}, {v})")
        attrs = [f"{r.key!r}: {v}" for r, v in items if r.kind == "attr"]
        if attrs:
            self.lines.append(f"{name}.__dict__.update({{{', '.join(attrs)}}})")
        return name

    def _replayed(self, expr):
        """The expression recomputing a replayed update from the values at call time."""
        def source(key):
            name = self._sources.get(key)
            if name is None:
                holder_id, rel = key
                holder = self.graph.get_node_by_id(holder_id)
                name = self._sources[key] = f"_r{len(self._sources)}"
                expr = access(self.slot_of(holder_id), rel, holder.obj, None, self.consts)
                self.prelude.append(f"{name} = {expr}")
            return name
        return render(expr, source, lambda v: repr(v) if is_literal(v) else self.consts.add(v))

    def _key(self, key):
        return repr(key) if is_literal(key) else self.consts.add(key)

    def update(self, node):
        """Statements that bring object `node` from outside to its final state."""
        obj = node.obj
        if isinstance(obj, torch.Tensor):
            # the compiled graph updates its values in place itself; Python attributes the
            # run set on it are set again
            names = [rel.key for rel in node.written if rel.kind == "attr"]
            if names:
                self._tensor_attrs(self.slot_of(node.node_id), obj, names)
            return
        if node.node_id == 0:
            return
        slot = self.slot_of(node.node_id)
        last = node.versions[-1].refs
        rp = self.replays
        if rp is not None and node.node_id in rp.lists:  # append-only: append the new items
            start = rp.lists[node.node_id]
            vals = [self.value(last[Relation("item", i)]) for i in range(start, len(obj))]
            self.lines.append(f"{slot}.extend([{', '.join(vals)}])")
            return
        if node.rewrite:
            if isinstance(obj, list):
                vals = [self.value(last[Relation("item", i)]) for i in range(len(obj))]
                self.lines.append(f"{slot}[:] = [{', '.join(vals)}]")
                return
            if type(obj) is set:  # e.g. a "warned once" registry
                vals = [self.value(child) for child in last.values()]
                self.lines.append(f"{slot}.clear()")
                self.lines.append(f"{slot}.update({_tuple_source(vals)})")
                return
            if isinstance(obj, dict):
                base = _builtin_base(type(obj))
                self.lines.append(f"{self.consts.add(base.clear)}({slot})")
                setitem = self.consts.add(base.__setitem__)
                for r, child in last.items():
                    self.lines.append(f"{setitem}({slot}, {self._key(r.key)}, "
                                      f"{self.value(child)})")
                return
            raise CannotMock(f"in-place update of a {type(obj).__name__}")
        for rel, is_set in node.written.items():
            value = None
            if is_set and rp is not None and (node.node_id, rel) in rp.writes:
                value = self._replayed(rp.writes[(node.node_id, rel)])
            elif is_set:
                value = self.value(last[rel])
            if rel.kind == "attr":
                base = type if isinstance(obj, type) else object  # (a class's attribute)
                if is_set:
                    self.lines.append(f"{self.consts.add(base.__setattr__)}({slot}, "
                                      f"{rel.key!r}, {value})")
                else:
                    self.lines.append(f"{self.consts.add(base.__delattr__)}({slot}, "
                                      f"{rel.key!r})")
            elif rel.kind in ("item", "global"):
                key = self._key(rel.key)
                if is_set:
                    self.lines.append(f"{slot}[{key}] = {value}")
                else:
                    self.lines.append(f"{slot}.pop({key}, None)")
            elif rel.kind == "cell":
                self.lines.append(f"{slot}.cell_contents = {value}")
            else:
                raise CannotMock(f"write through relation {rel.kind}")
