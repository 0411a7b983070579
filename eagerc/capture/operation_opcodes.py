"""Opcode handlers for operations and calls (paper §5.1): comparisons, binary operators,
subscripts, iteration, calls (annotated natives, Python functions, torch legacy
constructors, `autograd.Function.apply`), imports. Each runs before its instruction (see
instructions.py); uses of a SymbolicInt its own methods cannot see are baked here.
"""
import itertools
import operator
import types

import torch

from . import annotations, replayed_updates
from .frames import NULL, peek, peek_many
from .legacy import record_legacy
from .refgraph import Relation
from .state_opcodes import hashable_key, tag_read
from .symbolic import SymbolicInt, bake_all, bake_index, bake_mixed
from .training import function_applied, record_function_apply

_INPLACE_BINARY = set(range(13, 26))  # NB_INPLACE_* operand of BINARY_OP
_INT_IDENTITY = (operator.index, int)
_MUTABLE = (list, dict, set, bytearray)


def _operands(n):
    def handler(w, frame, name, arg, top):
        if w.mon.lifted:
            w.mon.check_lifted(peek_many(frame, top, n))
    return handler

# -- symbolic sizes (symbolic.py): uses of a SymbolicInt that its own methods cannot see ---
_SYMBOLIC_BINARY = {0, 2, 5, 6, 10}  # NB_ADD, FLOOR_DIVIDE, MULTIPLY, REMAINDER, SUBTRACT


def _compare_op(w, frame, name, arg, top):
    a, b = peek_many(frame, top, 2)
    if w.mon.lifted:
        w.mon.check_lifted((a, b))
    if w.mon.symbolic:
        bake_mixed(a, b)


def _format_value(w, frame, name, flags, top):
    if w.mon.lifted:
        w.mon.check_lifted((peek(frame, top, 0),))
    if w.mon.symbolic:
        bake_all(peek_many(frame, top, 2 if flags & 4 else 1))


def _binary_slice(w, frame, name, arg, top):  # 3.12: container[start:stop]
    if w.mon.symbolic:
        container, start, stop = peek_many(frame, top, 3)
        bake_index(container, (start, stop))


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
                bake_mixed(a, b)
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
        bake_index(container, (key,))
    if w.tags:
        tag = replayed_updates.take(w, top - 2)
        if tag is not None:
            if tag.expr[0] == "dict" and hashable_key(key):
                node = w.mon.graph.get_node_by_var(container)
                if node is not None:  # d[k]: the read key is what the guard checks
                    w.mon.replays.dict_read(tag.expr[1], node, key, key in container)
            else:
                w.mon.replays.escape(tag)
    if type(container) is dict or isinstance(container, dict):
        node = w.mon.graph.get_node_by_var(container)
        if node is not None and node.node_id in w.mon.lazy and hashable_key(key):
            w.mon.read_key(container, key, key in container)
        if type(container) is dict and node is not None and not node.new and \
                hashable_key(key) and type(dict.get(container, key)) in (int, float, list):
            w.post = lambda f, t: tag_read(w, f, t, container, Relation("item", key),
                                            peek(f, t, 0))


def _contains_op(w, frame, name, arg, top):
    key, container = peek_many(frame, top, 2)
    if w.mon.symbolic and isinstance(key, SymbolicInt) and not (
            type(container) in (list, tuple) and all(isinstance(v, int) for v in container)):
        key.bake()  # only int elements compare through our __eq__
    if isinstance(container, dict) and hashable_key(key):
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
        bake_index(container, (peek(frame, top, 1), peek(frame, top, 0)))
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


# Natives that only hold on to the items of a starred iterable (lucidrains' `zip(*map(lambda
# t: t.chunk(n), (q, k, v)))`, `zip(*packs)`): the items need no annotation of their own (the
# code making them ran watched, iterating them later is the program's own code or a torch
# call). Lifted and symbolic runs still stop: they must see the values passed to natives.
_STARRED_REFERENCES = (zip, itertools.chain, itertools.product)


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
        elif any(fn is f for f in _STARRED_REFERENCES) and not (w.mon.lifted or w.mon.symbolic):
            pass  # `zip(*map(chunk, ts))`: it holds the items; whatever reads them is watched
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


# opcode name -> handler (instructions.py's table)
HANDLERS = {
    "BINARY_OP": _binary_op, "KW_NAMES": _kw_names,
    "CALL": _call, "CALL_FUNCTION_EX": _call_function_ex, "MAKE_FUNCTION": _make_function,
    "IMPORT_NAME": _import_name, "BINARY_SUBSCR": _binary_subscr,
    "COMPARE_OP": _compare_op, "IS_OP": _operands(2), "UNARY_NEGATIVE": _operands(1),
    "UNARY_NOT": _operands(1), "UNARY_INVERT": _operands(1), "FORMAT_VALUE": _format_value,
    "BINARY_SLICE": _binary_slice,
    "POP_JUMP_IF_TRUE": _operands(1), "POP_JUMP_IF_FALSE": _operands(1),
    "POP_JUMP_FORWARD_IF_TRUE": _operands(1), "POP_JUMP_FORWARD_IF_FALSE": _operands(1),
    "POP_JUMP_BACKWARD_IF_TRUE": _operands(1), "POP_JUMP_BACKWARD_IF_FALSE": _operands(1),
    "CONTAINS_OP": _contains_op, "GET_ITER": _get_iter, "STORE_SLICE": _store_slice,
}
