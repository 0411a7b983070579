"""Sizes read by Python code, as values of the operator graph (paper §6.2.1, dynamic shapes).

In a symbolic monitor run the op recorder answers `x.size()`, `x.size(d)`, `x.shape`,
`x.numel()` of tensors whose sizes may vary (graph inputs reached from the call's arguments
and tensors computed from them) with `SymbolicInt`s: plain ints for every Python purpose that
also carry the FX node that recomputes them in the graph (`x.size(d)` on the input's node).

- Arithmetic with ints (+ - * // % and unary -) records an FX node and gives a SymbolicInt,
  so `x.view(b * s, -1)` puts the computation, not the number, into the graph.
- Comparisons (and truth tests) give a plain bool and record `_expect(cond, result)`: when
  the graph runs on fake tensors of a ShapeEnv, `bool()` of the symbolic condition becomes a
  shape guard, so the record serves exactly the calls that take the same branch.
- Any other use (a native call, an index into a Python container, formatting, hashing,
  float arithmetic, state the mock rebuilds) *bakes* the value: `bake` records
  `_expect(value == v, True)`, a shape guard that pins the value (e.g. `s0 == 8`, or
  `s0 // 4 == 2` for a range of sizes). Nothing baked can change under a passing guard.

Our frames are never traced (the monitor skips this package), but the FX calls they make
would be: recording runs with the monitor suspended.
"""
import operator
import types

import torch
import torch.fx as fx


def _expect(cond, expected):
    """A check of the operator graph: on fake tensors `bool(cond)` adds a shape guard; on real
    inputs it fails loudly instead of computing with a size the record was not made for."""
    if bool(cond) != expected:
        raise RuntimeError("eagerc.capture: a size check recorded by the monitor failed "
                           "(the record's guard should have rejected these inputs)")


fx.node.has_side_effect(_expect)  # no output uses it: dead-code elimination must keep it


def record_expect(graph, cond, expected):
    """The node of `graph` checking that the graph value `cond` is `expected` (`_expect`)."""
    return graph.call_function(_expect, (cond, bool(expected)))


def int_value(x):
    """The plain int of an int (SymbolicInt included) without calling our overrides."""
    return int.__int__(x)


class SymbolicInt(int):
    """An int read from (or computed from) tensor sizes in a symbolic monitor run.

    `node`: the FX node computing it; `rec`: the OpRecorder; `deps`: the (node_id, dim)
    pairs of outside tensors it may depend on (for the recorder's conservative rules).
    """

    def __new__(cls, value, node, rec, deps):
        self = int.__new__(cls, value)
        self.node, self.rec, self.deps, self.baked = node, rec, deps, False
        return self

    def bake(self):
        """Python code used the value itself: guard it (see the module docstring)."""
        if not self.baked and self.rec.recording():
            self.baked = True
            self.rec.record_check(operator.eq, self, int_value(self), True)

    def __hash__(self):  # dict keys, sets, caches: the value decides where it goes
        self.bake()
        return int.__hash__(self)

    def __bool__(self):
        result = int_value(self) != 0
        if self.rec.recording():
            self.rec.record_check(operator.ne, self, 0, result)
        return result

    def __neg__(self):
        if not self.rec.recording():
            return -int_value(self)
        return self.rec.record_int(operator.neg, (self,), -int_value(self))

    def __pos__(self):
        return self

    def __reduce__(self):  # copies and pickles are plain ints
        return int, (int_value(self),)


def _arith(op, name, reflected):
    def method(self, other):
        if isinstance(other, torch.Tensor):
            return NotImplemented  # the tensor's reflected operator: a torch op, recorded
        if not isinstance(other, int):
            self.bake()  # float arithmetic, sequence repeat ...: the value leaves the graph
            return getattr(int, name)(int_value(self), other)
        a, b = (other, self) if reflected else (self, other)
        value = op(int_value(a), int_value(b))
        if not self.rec.recording():
            return value
        return self.rec.record_int(op, (a, b), value)
    method.__name__ = name
    return method


def _compare(op, name):
    def method(self, other):
        if isinstance(other, torch.Tensor):
            return NotImplemented
        if not isinstance(other, int):
            if other is not None:
                self.bake()
            return getattr(int, name)(int_value(self), other)
        result = op(int_value(self), int_value(other))
        if self.rec.recording():
            self.rec.record_check(op, self, other, result)
        return result
    method.__name__ = name
    return method


def _baking(name):
    def method(self, *args):
        if args and isinstance(args[0], torch.Tensor):
            return NotImplemented  # e.g. n / t: the tensor's reflected operator, recorded
        self.bake()
        return getattr(int, name)(int_value(self), *args)
    method.__name__ = name
    return method


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("mod", operator.mod)]:
    setattr(SymbolicInt, f"__{_name}__", _arith(_op, f"__{_name}__", False))
    setattr(SymbolicInt, f"__r{_name}__", _arith(_op, f"__r{_name}__", True))
for _name, _op in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)]:
    setattr(SymbolicInt, f"__{_name}__", _compare(_op, f"__{_name}__"))
# Everything else int can do reads the value: bake, then behave as the plain int.
for _name in ("truediv rtruediv pow rpow lshift rlshift rshift rrshift and rand or ror xor "
              "rxor divmod rdivmod invert abs float complex round trunc floor ceil "
              "format").split():
    setattr(SymbolicInt, f"__{_name}__", _baking(f"__{_name}__"))


def has_symbolic(value, depth=3):
    """Whether `value` holds a SymbolicInt (looking `depth` levels into containers)."""
    if isinstance(value, SymbolicInt):
        return True
    if depth and isinstance(value, (tuple, list)):
        return any(has_symbolic(v, depth - 1) for v in value)
    if depth and isinstance(value, dict):
        return any(has_symbolic(v, depth - 1) for v in value.values())
    if isinstance(value, slice):
        return any(has_symbolic(v, 0) for v in (value.start, value.stop, value.step))
    return False


def bake_all(values, depth=3):
    """Bake every SymbolicInt in `values` (and `depth` levels into containers, slices)."""
    for v in values:
        if isinstance(v, SymbolicInt):
            v.bake()
        elif depth and isinstance(v, (tuple, list)) and not isinstance(v, str):
            bake_all(v, depth - 1)
        elif depth and isinstance(v, dict):
            bake_all(list(v.values()), depth - 1)
        elif isinstance(v, slice):
            bake_all((v.start, v.stop, v.step), 0)


def plain(value):
    """`value` with SymbolicInts replaced by ints (through tuples, lists, torch.Size, dicts,
    slices); the same object when it holds none."""
    if isinstance(value, SymbolicInt):
        return int_value(value)
    if not has_symbolic(value, depth=8):
        return value
    if isinstance(value, torch.Size):
        return torch.Size([plain(v) for v in value])
    if isinstance(value, (tuple, list)):
        seq = [plain(v) for v in value]
        if type(value) in (tuple, list):
            return type(value)(seq)
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*seq)
        return type(value)(seq)
    if isinstance(value, dict):
        return type(value)({k: plain(v) for k, v in value.items()})
    if isinstance(value, slice):
        return slice(plain(value.start), plain(value.stop), plain(value.step))
    return value


def scrub(graph, result):
    """After the run: the result and the objects of the RefGraph hold plain ints again (a
    SymbolicInt is an implementation detail of the monitor; its value was baked into the
    record where it mattered). Returns the result to give the caller."""
    for node in graph.sn[1:]:
        obj = node.obj
        try:
            if type(obj) is list:
                for i, v in enumerate(obj):
                    if has_symbolic(v, 1):
                        obj[i] = plain(v)
            elif isinstance(obj, dict):
                for k, v in list(dict.items(obj)):
                    if has_symbolic(v, 1):
                        dict.__setitem__(obj, k, plain(v))
            elif isinstance(obj, types.CellType):
                if has_symbolic(obj.cell_contents, 1):
                    obj.cell_contents = plain(obj.cell_contents)
            if not isinstance(obj, (type, torch.Tensor, types.ModuleType, types.CellType)):
                d = getattr(obj, "__dict__", None)  # attributes (also of dict subclasses)
                if type(d) is dict:
                    for k, v in list(d.items()):
                        if has_symbolic(v, 1):
                            d[k] = plain(v)
        except Exception:  # noqa: BLE001, S110 - a value that cannot be replaced stays an
            pass  # int subclass with no graph behind it (it acts as a plain int)
    if isinstance(result, SymbolicInt) or type(result) in (tuple, torch.Size):
        return plain(result)
    return result


def bake_index(container, keys):
    """An index or slice bound into a Python container: the value picks the element."""
    if not isinstance(container, torch.Tensor):  # tensor indexing is a torch op: recorded
        bake_all(keys)


def bake_mixed(a, b):
    """`a op b` where the other operand is no int and no tensor (a float, a string ...):
    Python computes with the plain value, our methods may never be called."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, SymbolicInt) and not isinstance(y, (int, torch.Tensor)) and \
                y is not None:
            x.bake()
