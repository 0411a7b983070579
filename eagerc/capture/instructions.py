"""Per-instruction handlers of the opcode monitor (paper §5.1: execution state capture).

Each handler runs before its instruction with the inputs readable on the value stack
(`frames.peek`); a handler that needs the instruction's output leaves a `post` action that runs
at the frame's next instruction, when the output is on top of the stack. Handlers translate
instructions into RefGraph updates through the `Monitor` (reads, writes, calls).
"""
import dis
import operator
import os
import sys
import types

import torch

from . import annotations, frames, replayed_updates
from .frames import NULL, peek, peek_many
from .refgraph import Relation
from .symbolic import SymbolicInt, bake_all
from .legacy import record_legacy
from .training import function_applied, record_function_apply

_OWN_DIR = os.path.dirname(os.path.abspath(__file__))
# torch's __torch_function__ dispatch plumbing: it only routes calls to the op recorder.
_TORCH_DIR = os.path.dirname(torch.__file__)
_PLUMBING = tuple(os.path.join(_TORCH_DIR, *p) for p in [
    ("overrides.py",), ("utils", "_python_dispatch.py"), ("_jit_internal.py",)])
SKIP = object()
_PY312 = sys.version_info >= (3, 12)
_INPLACE_BINARY = set(range(13, 26))  # NB_INPLACE_* operand of BINARY_OP
_INT_IDENTITY = (operator.index, int)
_TAGGED = (int, float, list, dict)  # values read from outside that replayed_updates.py follows
_MUTABLE = (list, dict, set, bytearray)


def _hashable_key(key):
    try:
        hash(key)
        return True
    except TypeError:
        return False


def analyze(code):
    """Per instruction index: (handler, argval, arg) for instructions that need one."""
    if code.co_filename.startswith(_OWN_DIR) or code.co_filename in _PLUMBING:
        return SKIP
    table = [None] * (len(code.co_code) // 2)
    pops = [0] * len(table)  # stack items each instruction consumes (replayed_updates.py's tags)
    for ins in dis.get_instructions(code):
        h = _HANDLERS.get(ins.opname)
        if h is not None:
            table[ins.offset // 2] = (h, ins.argval, ins.arg)
        pops[ins.offset // 2] = replayed_updates.pops(ins)
    n = frames.n_localsplus(code)
    tops = [None if d is None else n + d for d in frames.stack_depths(code)]
    return table, tops, pops


class FrameWatch:
    """Per-frame trace function: runs the handler of each instruction and its post action."""

    __slots__ = ("mon", "table", "tops", "pops", "post", "kwnames", "resume", "tags", "ltags")

    def __init__(self, mon, info):
        self.mon, self.post, self.kwnames = mon, None, ()
        self.table, self.tops, self.pops = info
        self.tags, self.ltags = {}, {}  # replayed_updates.py: stack slot / local index -> Tag
        self.resume = False  # this frame suspended watching for one call (an annotated
        # Python function or an import): watch again at its next event, whatever it is

    def trace(self, frame, event, arg):
        mon = self.mon
        if self.resume:
            self.resume = False
            mon.suspend -= 1
            mon.opaque -= 1
        if mon.stopped is not None:
            return None
        if event != "opcode":
            self.post = None
            if self.tags:
                replayed_updates.escape_all(self)
            return self.safe_trace
        idx = frame.f_lasti >> 1
        top = self.tops[idx]
        if self.tags and top is not None:
            replayed_updates.check(self, frame, top)
        post = self.post
        if post is not None:
            self.post = None
            if top is not None:
                post(frame, top)
        if mon.stopped is not None:
            return None
        entry = self.table[idx]
        if entry is not None and top is not None and not mon.suspend:
            entry[0](self, frame, entry[1], entry[2], top)
        if self.tags and top is not None and self.pops[idx] != 0:
            replayed_updates.escape_popped(self, self.pops[idx], top)  # what the handler left
        return self.safe_trace

    def safe_trace(self, frame, event, arg):
        # A fault of the monitor must never change the program: stop capturing instead.
        try:
            return self.trace(frame, event, arg)
        except Exception as e:  # noqa: BLE001 - any fault, reported as the stop reason
            self.mon.stop(f"monitor error: {type(e).__name__}: {e}")
            return None


# -- instruction handlers: (watch, frame, argval, arg) ---------------------------------------
def _load_attr(w, frame, name, arg, top):
    if _PY312 and arg & 1:
        return _load_method(w, frame, name, arg, top)
    obj = peek(frame, top, 0)
    if w.mon.symbolic and isinstance(obj, SymbolicInt):
        obj.bake()  # n.real, n.numerator ...: int's own attributes give the plain value
    tag = replayed_updates.take(w, top - 1) if w.tags else None
    if tag is not None:
        w.mon.replays.escape(tag)  # n.real, lst.copy ...: the value is used
    if w.mon.holder(obj) is not None:
        def after(f, t):
            value = peek(f, t, 0)
            w.mon.read_attr(obj, name, value)
            _tag_read(w, f, t, obj, Relation("attr", name), value)
        w.post = after


def _tag_read(w, f, t, holder_obj, rel, value):
    """A value read from outside state: tag it (replayed_updates.py) when it is a number, a
    list or a dict."""
    if type(value) not in _TAGGED:
        return
    holder = w.mon.graph.get_node_by_var(holder_obj)
    if holder is None or holder.new or holder.versions[-1].refs.get(rel) is None and \
            rel not in holder.written:
        return
    if frames.local_slot(f, t - 1) is not value:
        return  # not on top (an interpreter that pushes NULL after it): not followed
    tag = w.mon.replays.source(holder, rel, value)
    if tag is not None:
        w.tags[t - 1] = tag


def _load_method(w, frame, name, arg, top):
    obj = peek(frame, top, 0)
    tag = replayed_updates.take(w, top - 1) if w.tags else None
    if tag is not None and not (tag.expr[0] == "list" and name in replayed_updates.APPEND_METHODS):
        w.mon.replays.escape(tag)  # any other use of the list (or number)
    if w.mon.holder(obj) is None:
        return

    def after(f, t):
        meth, value = peek_many(f, t, 2)
        if meth is NULL:
            w.mon.read_attr(obj, name, value)
        else:
            w.mon.read_attr(obj, name, meth)
    w.post = after


def _load_global(w, frame, name, arg, top):
    mon, g = w.mon, frame.f_globals
    if name in g:
        mon.graph.read(mon.const_node(g), Relation("global", name), g[name])
        if type(g[name]) in _TAGGED:
            value = g[name]
            w.post = lambda f, t: _tag_read(w, f, t, g, Relation("global", name), value)
    else:
        mon.add_absent(mon.const_node(g), name)
        b = frame.f_builtins
        if name in b:
            mon.graph.read(mon.const_node(b), Relation("global", name), b[name])


def _external_cell(w, frame, name, arg):
    code = frame.f_code
    if name not in code.co_freevars or w.mon.is_new_function(frames.frame_function(frame)):
        return None
    cell = frames.local_slot(frame, arg)
    return None if cell is NULL else cell


def _load_deref(w, frame, name, arg, top):
    cell = _external_cell(w, frame, name, arg)
    if cell is not None:
        try:
            value = cell.cell_contents
        except ValueError:
            return
        w.mon.graph.read(w.mon.const_node(cell), Relation("cell"), value)


def _store_deref(w, frame, name, arg, top):
    cell = _external_cell(w, frame, name, arg)
    if cell is not None:
        w.mon.graph.write(w.mon.const_node(cell), Relation("cell"), peek(frame, top, 0))


def _store_global(w, frame, name, arg, top):
    mon = w.mon
    value = peek(frame, top, 0)
    holder = mon.const_node(frame.f_globals)
    mon.replays.store(holder, Relation("global", name), replayed_updates.take(w, top - 1))
    mon.graph.write(holder, Relation("global", name), value)


def _delete_global(w, frame, name, arg, top):
    mon = w.mon
    mon.graph.write(mon.const_node(frame.f_globals), Relation("global", name), None, True)


def _store_attr(w, frame, name, arg, top):
    obj, value = peek(frame, top, 0), peek(frame, top, 1)
    if w.tags:
        owner = replayed_updates.take(w, top - 1)
        if owner is not None:
            w.mon.replays.escape(owner)
    tag = replayed_updates.take(w, top - 2) if w.tags else None
    holder = w.mon.holder(obj)
    if holder is not None:
        if tag is not None and not _plain_setattr(obj):
            w.mon.replays.escape(tag)  # a Python __setattr__ may look at the value
            tag = None
        w.mon.replays.store(holder, Relation("attr", name), tag)
    elif tag is not None:
        w.mon.replays.escape(tag)
    w.mon.write_attr(obj, name, value)


def _plain_setattr(obj):
    """Whether `obj.name = v` stores v whatever its value: object's own __setattr__, or
    nn.Module's (which looks only at the value's type)."""
    setattr_ = type(obj).__setattr__
    return setattr_ is object.__setattr__ or setattr_ is torch.nn.Module.__setattr__


def _delete_attr(w, frame, name, arg, top):
    w.mon.write_attr(peek(frame, top, 0), name, None, delete=True)


def _store_subscr(w, frame, name, arg, top):
    value, container, key = peek_many(frame, top, 3)
    if w.mon.symbolic:
        _bake_index(container, (key,))
    if w.tags:
        for slot in (top - 1, top - 2):
            t = replayed_updates.take(w, slot)
            if t is not None and not (slot == top - 2 and t.expr[0] == "dict" and
                                      _hashable_key(key)):
                w.mon.replays.escape(t)  # (d[k] = v on a followed dict: a keyed write)
    tag = replayed_updates.take(w, top - 3) if w.tags else None
    holder = w.mon.holder(container)
    if holder is not None and type(container) is dict and _hashable_key(key):
        w.mon.replays.store(holder, Relation("item", key), tag)
    elif tag is not None:
        w.mon.replays.escape(tag)
    w.mon.write_item(container, key, value)


def _delete_subscr(w, frame, name, arg, top):
    container, key = peek_many(frame, top, 2)
    if w.mon.symbolic:
        _bake_index(container, (key,))
    w.mon.write_item(container, key, None, delete=True)


def _operands(n):
    def handler(w, frame, name, arg, top):
        if w.mon.lifted:
            w.mon.check_lifted(peek_many(frame, top, n))
    return handler


# -- symbolic sizes (symbolic.py): uses of a SymbolicInt that its own methods cannot see ---
_SYMBOLIC_BINARY = {0, 2, 5, 6, 10}  # NB_ADD, FLOOR_DIVIDE, MULTIPLY, REMAINDER, SUBTRACT


def _bake_index(container, keys):
    """An index or slice bound into a Python container: the value picks the element."""
    if not isinstance(container, torch.Tensor):  # tensor indexing is a torch op: recorded
        bake_all(keys)


def _bake_mixed(a, b):
    """`a op b` where the other operand is no int and no tensor (a float, a string ...):
    Python computes with the plain value, our methods may never be called."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, SymbolicInt) and not isinstance(y, (int, torch.Tensor)) and \
                y is not None:
            x.bake()


def _compare_op(w, frame, name, arg, top):
    a, b = peek_many(frame, top, 2)
    if w.mon.lifted:
        w.mon.check_lifted((a, b))
    if w.mon.symbolic:
        _bake_mixed(a, b)


def _format_value(w, frame, name, flags, top):
    if w.mon.lifted:
        w.mon.check_lifted((peek(frame, top, 0),))
    if w.mon.symbolic:
        bake_all(peek_many(frame, top, 2 if flags & 4 else 1))


def _binary_slice(w, frame, name, arg, top):  # 3.12: container[start:stop]
    if w.mon.symbolic:
        container, start, stop = peek_many(frame, top, 3)
        _bake_index(container, (start, stop))


def _binary_op(w, frame, name, arg, top):
    if w.mon.lifted:
        w.mon.check_lifted(peek_many(frame, top, 2))
    if w.mon.symbolic:
        a, b = peek_many(frame, top, 2)
        if isinstance(a, SymbolicInt) or isinstance(b, SymbolicInt):
            if arg % 13 not in _SYMBOLIC_BINARY and not isinstance(a, torch.Tensor) and \
                    not isinstance(b, torch.Tensor):
                bake_all((a, b), 0)
            else:
                _bake_mixed(a, b)
    if w.tags:
        a, b = peek_many(frame, top, 2)
        replayed_updates.binary_op(w, frame, arg, a, b, top)
    if arg in _INPLACE_BINARY:
        target = peek(frame, top, 1)
        node = w.mon.holder(target)
        if node is not None and isinstance(target, _MUTABLE):
            w.mon.rewrite(node)


def _binary_subscr(w, frame, name, arg, top):
    container, key = peek_many(frame, top, 2)
    if w.mon.symbolic:
        _bake_index(container, (key,))
    if w.tags:
        tag = replayed_updates.take(w, top - 2)
        if tag is not None:
            if tag.expr[0] == "dict" and _hashable_key(key):
                node = w.mon.graph.get_node_by_var(container)
                if node is not None:  # d[k]: the read key is what the guard checks
                    w.mon.replays.dict_read(tag.expr[1], node, key, key in container)
            else:
                w.mon.replays.escape(tag)
    if type(container) is dict or isinstance(container, dict):
        node = w.mon.graph.get_node_by_var(container)
        if node is not None and node.node_id in w.mon.lazy and _hashable_key(key):
            w.mon.read_key(container, key, key in container)
        if type(container) is dict and node is not None and not node.new and \
                _hashable_key(key) and type(dict.get(container, key)) in (int, float, list):
            w.post = lambda f, t: _tag_read(w, f, t, container, Relation("item", key),
                                            peek(f, t, 0))


def _contains_op(w, frame, name, arg, top):
    key, container = peek_many(frame, top, 2)
    if w.mon.symbolic and isinstance(key, SymbolicInt) and not (
            type(container) in (list, tuple) and all(isinstance(v, int) for v in container)):
        key.bake()  # only int elements compare through our __eq__
    if isinstance(container, dict) and _hashable_key(key):
        w.mon.read_key(container, key, key in container)


def _get_iter(w, frame, name, arg, top):
    obj = peek(frame, top, 0)
    if isinstance(obj, dict):
        node = w.mon.graph.get_node_by_var(obj)
        if node is not None and node.node_id in w.mon.lazy:
            w.mon.expand_lazy(node)


def _store_slice(w, frame, name, arg, top):
    container = peek(frame, top, 2)
    if w.mon.symbolic:
        _bake_index(container, (peek(frame, top, 1), peek(frame, top, 0)))
    node = w.mon.holder(container)
    if node is not None and isinstance(container, _MUTABLE):
        w.mon.rewrite(node)


def _kw_names(w, frame, name, arg, top):
    w.kwnames = frame.f_code.co_consts[arg]


def _call(w, frame, name, argc, top):
    items = peek_many(frame, top, argc + 2)
    w.kwnames = ()
    if items[0] is NULL:
        fn, args = items[1], items[2:]
    else:
        fn, args = items[0], items[1:]
    owner = getattr(fn, "__self__", None)
    if type(fn) in (types.BuiltinFunctionType, types.MethodWrapperType) and owner is not None \
            and not isinstance(owner, (types.ModuleType, type)):
        args = [owner] + list(args)
    if w.tags and argc == 1 and fn in _INT_IDENTITY and type(args[-1]) is int:
        # operator.index(n), int(n): n itself (replayed_updates.py)
        tag = replayed_updates.take(w, top - 1)
        if tag is not None:
            replayed_updates.push_after(w, tag)
    _apply_call(w, fn, args)


def _apply_call(w, fn, args, kw_values=()):
    def set_post(after):
        w.post = lambda f, t: after(peek(f, t, 0))
    applied = function_applied(fn, args) if w.mon.stopped is None else None
    if (applied is not None and record_function_apply(w.mon, *applied, kw_values, set_post)) \
            or (w.mon.stopped is None and type(fn) is not types.FunctionType and
                record_legacy(w.mon, fn, args, kw_values, set_post)):
        w.mon.suspend += 1  # runs unwatched: the graph node recorded after it stands for it
        w.mon.opaque += 1
        w.resume = True
        return
    post = w.mon.before_call(fn, args, kw_values)
    if post is not None:
        w.post = lambda f, t: post(peek(f, t, 0))
    if type(fn) in (types.FunctionType, types.MethodType) and \
            annotations.lookup(fn) is not annotations.FOLLOW and w.mon.stopped is None:
        w.mon.suspend += 1  # annotated Python code: its annotation stands for its body
        w.mon.opaque += 1  # (its torch calls too: they are not the program's graph)
        w.resume = True


def _call_function_ex(w, frame, name, flags, top):
    has_kw = flags & 1
    fn = peek(frame, top, 1 + has_kw)
    args = peek(frame, top, has_kw)
    kw = peek(frame, top, 0) if has_kw else None
    if type(args) not in (tuple, list):
        # `f(*gen)`: the interpreter turns the iterable into a tuple itself; reading it
        # here would consume a generator or iterator before the call sees it.
        ann = annotations.lookup(fn)
        if ann is not None and ann.as_op:
            _apply_call(w, fn, [])  # a torch API: the op recorder sees its real arguments
        elif ann is not annotations.FOLLOW:
            w.mon.stop(f"native call with a starred {type(args).__name__}")
        return
    args = list(args)
    _apply_call(w, fn, args, list(kw.values()) if isinstance(kw, dict) else ())


def _make_function(w, frame, name, arg, top):
    w.post = lambda f, t: w.mon.new_function(peek(f, t, 0))


def _import_name(w, frame, name, arg, top):
    # Importing an already imported module is a sys.modules lookup; the import machinery
    # itself is not part of the program's behaviour.
    w.mon.suspend += 1
    w.mon.opaque += 1
    w.resume = True


_HANDLERS = {
    "LOAD_ATTR": _load_attr, "LOAD_METHOD": _load_method, "LOAD_GLOBAL": _load_global,
    "LOAD_DEREF": _load_deref, "LOAD_CLASSDEREF": _load_deref, "STORE_DEREF": _store_deref,
    "STORE_GLOBAL": _store_global, "DELETE_GLOBAL": _delete_global,
    "STORE_ATTR": _store_attr, "DELETE_ATTR": _delete_attr, "STORE_SUBSCR": _store_subscr,
    "DELETE_SUBSCR": _delete_subscr, "BINARY_OP": _binary_op, "KW_NAMES": _kw_names,
    "CALL": _call, "CALL_FUNCTION_EX": _call_function_ex, "MAKE_FUNCTION": _make_function,
    "IMPORT_NAME": _import_name, "BINARY_SUBSCR": _binary_subscr,
    "COMPARE_OP": _compare_op, "IS_OP": _operands(2), "UNARY_NEGATIVE": _operands(1),
    "UNARY_NOT": _operands(1), "UNARY_INVERT": _operands(1), "FORMAT_VALUE": _format_value,
    "BINARY_SLICE": _binary_slice,
    "POP_JUMP_IF_TRUE": _operands(1), "POP_JUMP_IF_FALSE": _operands(1),
    "POP_JUMP_FORWARD_IF_TRUE": _operands(1), "POP_JUMP_FORWARD_IF_FALSE": _operands(1),
    "POP_JUMP_BACKWARD_IF_TRUE": _operands(1), "POP_JUMP_BACKWARD_IF_FALSE": _operands(1),
    "CONTAINS_OP": _contains_op, "GET_ITER": _get_iter, "STORE_SLICE": _store_slice,
    "LOAD_FAST": replayed_updates.load_fast, "LOAD_FAST_CHECK": replayed_updates.load_fast,
    "STORE_FAST": replayed_updates.store_fast, "SWAP": replayed_updates.swap,
    "COPY": replayed_updates.copy,
}
