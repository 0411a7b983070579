"""Opcode handlers for reads and writes of state (paper §5.1): attributes, methods, globals,
closure cells, container items. Each runs before its instruction (see instructions.py) and
turns it into RefGraph reads and writes through the `Monitor`; a value read from outside is
tagged for replayed_updates.py.
"""
import sys

import torch

from . import frames, replayed_updates
from .frames import NULL, peek, peek_many
from .refgraph import Relation
from .symbolic import SymbolicInt, bake_index

_PY312 = sys.version_info >= (3, 12)
_TAGGED = (int, float, list, dict)  # values read from outside that replayed_updates.py follows


def hashable_key(key):
    try:
        hash(key)
        return True
    except TypeError:
        return False


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
            tag_read(w, f, t, obj, Relation("attr", name), value)
        w.post = after


def tag_read(w, f, t, holder_obj, rel, value):
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
            w.post = lambda f, t: tag_read(w, f, t, g, Relation("global", name), value)
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
    return setattr_ is object.__setattr__ or setattr_ is torch.nn.Module.__setattr__ or \
        setattr_ is type.__setattr__ and isinstance(obj, type)  # a class's counter


def _delete_attr(w, frame, name, arg, top):
    w.mon.write_attr(peek(frame, top, 0), name, None, delete=True)


def _store_subscr(w, frame, name, arg, top):
    value, container, key = peek_many(frame, top, 3)
    if w.mon.symbolic:
        bake_index(container, (key,))
    if w.tags:
        for slot in (top - 1, top - 2):
            t = replayed_updates.take(w, slot)
            if t is not None and not (slot == top - 2 and t.expr[0] == "dict" and
                                      hashable_key(key)):
                w.mon.replays.escape(t)  # (d[k] = v on a followed dict: a keyed write)
    tag = replayed_updates.take(w, top - 3) if w.tags else None
    holder = w.mon.holder(container)
    if holder is not None and type(container) is dict and hashable_key(key):
        w.mon.replays.store(holder, Relation("item", key), tag)
    elif tag is not None:
        w.mon.replays.escape(tag)
    w.mon.write_item(container, key, value)


def _delete_subscr(w, frame, name, arg, top):
    container, key = peek_many(frame, top, 2)
    if w.mon.symbolic:
        bake_index(container, (key,))
    w.mon.write_item(container, key, None, delete=True)


# opcode name -> handler (instructions.py's table)
HANDLERS = {
    "LOAD_ATTR": _load_attr, "LOAD_METHOD": _load_method, "LOAD_GLOBAL": _load_global,
    "LOAD_DEREF": _load_deref, "LOAD_CLASSDEREF": _load_deref, "STORE_DEREF": _store_deref,
    "STORE_GLOBAL": _store_global, "DELETE_GLOBAL": _delete_global,
    "STORE_ATTR": _store_attr, "DELETE_ATTR": _delete_attr, "STORE_SUBSCR": _store_subscr,
    "DELETE_SUBSCR": _delete_subscr,
}
