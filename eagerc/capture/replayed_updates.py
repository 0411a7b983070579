"""Side effects the mock replays instead of guarding (issue 12): counters and appends.

`self.calls += 1`, `STATS["n"] += 1`, `COUNT += 1`, `LOG.append(len(ys))`: guarding the value
read (`calls == 0`, `len(LOG) == 3`) makes every call miss and record again. When the value
read from outside only flows, through arithmetic, back into outside state (or the list is
only appended to), the record instead guards its type and the mock recomputes the update
from the current value: `S.calls = S.calls + 1`, `LOG.extend([...])`.

How the monitor knows where a value goes: a *tag* follows it on the value stack and in
local variables of the frame that read it (`FrameWatch.tags`: stack slot -> `Tag`;
`FrameWatch.ltags`: local index -> `Tag`). Loads from outside make tags; LOAD_FAST,
STORE_FAST, COPY, SWAP and arithmetic (BINARY_OP + - * / // %) move them; stores into
attributes, globals and dict items consume them into a *replay*; every other use of a
tagged value (a comparison, a call, a return, a branch, a tensor op ...) *escapes* it: at
the next instruction a tagged slot that is gone or holds another object counts as used,
and its sources are then guarded by value as before. An append-only list: its tag is
consumed only by `.append`/`.extend` method loads. A dict used only by key (`d[k]` reads and
`d[k] = v` writes): its guard checks the keys read (their values, or their absence), not its
whole key set, so a key the first call adds does not make the next identical call miss.

At record time (`plan`) a replay is kept only when its sources never escaped and the
expression, evaluated on the values the run read, gives the final value the run left.
"""
from typing import Any, NamedTuple

from .frames import local_slot
from .refgraph import Relation
from .symbolic import SymbolicInt, plain

# BINARY_OP operand (mod 13: in-place forms too) -> Python operator source.
OPS = {0: "+", 2: "//", 5: "*", 6: "%", 10: "-", 11: "/"}
_NUMBER = (int, float)
APPEND_METHODS = ("append", "extend")


class Tag(NamedTuple):
    obj: Any  # the object the tag belongs to (identity checked on every use)
    expr: tuple  # ("src", key) | ("const", v) | ("op", k, a, b) | ("list", key)


def render(expr, source, const):
    """Python source of `expr`; `source(key)` and `const(value)` name its leaves."""
    kind = expr[0]
    if kind == "src":
        return source(expr[1])
    if kind == "const":
        return const(expr[1])
    return f"({render(expr[2], source, const)} {OPS[expr[1]]} {render(expr[3], source, const)})"


def sources(expr):
    if expr[0] in ("src", "list", "dict"):
        return [expr[1]]
    if expr[0] == "op":
        return sources(expr[2]) + sources(expr[3])
    return []


def number(obj):
    return type(obj) in _NUMBER


def _operand(obj):
    return number(obj) or isinstance(obj, SymbolicInt)


class Replays:
    """Per monitor run: sources of tags, escaped sources, recorded replays."""

    def __init__(self):
        self.values = {}  # source key (holder node_id, Relation) -> the value read
        self.escaped = set()
        self.writes = {}  # (holder node_id, Relation) -> expr of the value last stored
        self.appends = {}  # list source key -> the list object
        self.dicts = {}  # dict source key -> (the dict, {key read: present then})

    def escape(self, tag):
        self.escaped.update(sources(tag.expr))

    def source(self, holder, rel, obj):
        """A tag for `obj` read through `holder`'s reference `rel`, or None."""
        key = (holder.node_id, rel)
        if rel in holder.written:  # reading back what this run stored
            expr = self.writes.get(key)
            return Tag(obj, expr) if expr is not None and number(obj) else None
        if number(obj):
            self.values.setdefault(key, obj)
            return Tag(obj, ("src", key))
        if type(obj) is list:
            self.appends.setdefault(key, obj)
            return Tag(obj, ("list", key))
        if type(obj) is dict:
            self.dicts.setdefault(key, (obj, {}))
            return Tag(obj, ("dict", key))
        return None

    def dict_read(self, key, node, item, present):
        """`d[item]` of a followed dict; reads of keys this run stored are its own."""
        if Relation("item", item) not in node.written and key in self.dicts:
            self.dicts[key][1].setdefault(item, present)

    def store(self, holder, rel, tag):
        """A value was stored into `holder.rel` (tag None: an untracked value)."""
        key = (holder.node_id, rel)
        if tag is None or tag.expr[0] in ("list", "dict"):
            self.writes.pop(key, None)
            if tag is not None:
                self.escape(tag)
        else:
            self.writes[key] = tag.expr


# -- per-instruction tag movement (called from instructions.py) ------------------------------
def check(w, frame, top):
    """Before an instruction: tags whose slot was consumed by the last one escape."""
    for slot, tag in list(w.tags.items()):
        if slot >= top or local_slot(frame, slot) is not tag.obj:
            del w.tags[slot]
            w.mon.replays.escape(tag)


# Instructions that leave the stack items below their own pushes alone, or whose handler
# deals with the tags of what they pop (the rest: `pops` below, escaping what they pop).
TAG_SAFE = frozenset("""LOAD_CONST LOAD_GLOBAL LOAD_DEREF LOAD_CLOSURE LOAD_CLASSDEREF PUSH_NULL
    KW_NAMES NOP RESUME PRECALL CACHE EXTENDED_ARG JUMP_FORWARD JUMP_BACKWARD
    JUMP_BACKWARD_NO_INTERRUPT LOAD_ASSERTION_ERROR MAKE_CELL COPY_FREE_VARS LOAD_FAST
    LOAD_FAST_CHECK LOAD_FAST_AND_CLEAR STORE_FAST COPY SWAP BINARY_OP STORE_ATTR
    STORE_GLOBAL STORE_SUBSCR LOAD_METHOD LOAD_ATTR""".split())
_POPS = {"CALL": lambda a: a + 2, "BINARY_SUBSCR": 2, "COMPARE_OP": 2, "IS_OP": 2,
         "CONTAINS_OP": 2, "POP_TOP": 1, "RETURN_VALUE": 1, "UNARY_NEGATIVE": 1,
         "UNARY_NOT": 1, "UNARY_INVERT": 1, "UNARY_POSITIVE": 1, "GET_ITER": 1,
         "BUILD_TUPLE": lambda a: a, "BUILD_LIST": lambda a: a, "BUILD_SET": lambda a: a,
         "LIST_APPEND": 1, "STORE_DEREF": 1, "POP_JUMP_FORWARD_IF_TRUE": 1,
         "POP_JUMP_FORWARD_IF_FALSE": 1, "POP_JUMP_BACKWARD_IF_TRUE": 1,
         "POP_JUMP_BACKWARD_IF_FALSE": 1, "POP_JUMP_IF_TRUE": 1, "POP_JUMP_IF_FALSE": 1,
         "JUMP_IF_TRUE_OR_POP": 1, "JUMP_IF_FALSE_OR_POP": 1, "FORMAT_VALUE": 2}


def pops(ins):
    """How many stack items `ins` may consume (None: do not know, all of them)."""
    if ins.opname in TAG_SAFE:
        return 0
    n = _POPS.get(ins.opname)
    return n(ins.arg or 0) if callable(n) else n


def escape_popped(w, n, top):
    """A tag-unaware instruction consumes the top `n` items (None: any)."""
    for slot in [s for s in w.tags if n is None or s >= top - n]:
        w.mon.replays.escape(w.tags.pop(slot))


def escape_all(w):
    for tag in w.tags.values():
        w.mon.replays.escape(tag)
    w.tags.clear()


def take(w, slot):
    """Consume the tag of stack slot `slot` (None when untagged)."""
    return w.tags.pop(slot, None)


def push_after(w, tag):
    """Tag the value the current instruction leaves on top of the stack."""
    prev = w.post

    def post(f, t):
        if prev is not None:
            prev(f, t)
        if tag is not None and t - 1 >= 0 and local_slot(f, t - 1) is tag.obj:
            w.tags[t - 1] = tag
    w.post = post


def tag_result(w, make):
    """Tag the instruction's result with `make(result)` (a Tag or None)."""
    prev = w.post

    def post(f, t):
        if prev is not None:
            prev(f, t)
        tag = make(local_slot(f, t - 1))
        if tag is not None:
            w.tags[t - 1] = tag
    w.post = post


def load_fast(w, frame, name, arg, top):
    tag = w.ltags.get(arg)
    if tag is not None:
        if local_slot(frame, arg) is tag.obj:
            push_after(w, tag)
        else:
            del w.ltags[arg]


def store_fast(w, frame, name, arg, top):
    tag = take(w, top - 1)
    if tag is not None:
        w.ltags[arg] = tag
    else:
        w.ltags.pop(arg, None)


def swap(w, frame, name, n, top):
    a, b = w.tags.pop(top - 1, None), w.tags.pop(top - n, None)
    if a is not None:
        w.tags[top - n] = a
    if b is not None:
        w.tags[top - 1] = b


def copy(w, frame, name, n, top):
    tag = w.tags.get(top - n)
    if tag is not None:
        prev = w.post

        def post(f, t):
            if prev is not None:
                prev(f, t)
            w.tags[t - 1] = tag
        w.post = post


def binary_op(w, frame, arg, a, b, top):
    ta, tb = take(w, top - 2), take(w, top - 1)
    if ta is None and tb is None:
        return
    op = arg % 13
    for v, t in ((a, ta), (b, tb)):
        if t is None and isinstance(v, SymbolicInt):
            v.bake()  # the mock recomputes with its value: pin it
    if op in OPS and _operand(a) and _operand(b) and all(
            t is None or t.expr[0] not in ("list", "dict") for t in (ta, tb)):
        ea = ta.expr if ta is not None else ("const", plain(a))
        eb = tb.expr if tb is not None else ("const", plain(b))
        # (a SymbolicInt result: its other operand's value is pinned by the bake above)
        tag_result(w, lambda out: Tag(out, ("op", op, ea, eb))
                   if number(out) or isinstance(out, SymbolicInt) else None)
        return
    for t in (ta, tb):
        if t is not None:
            w.mon.replays.escape(t)


# -- at record time ---------------------------------------------------------------------------
def evaluate(expr, values):
    kind = expr[0]
    if kind == "src":
        return values[expr[1]]
    if kind == "const":
        return expr[1]
    a, b = evaluate(expr[2], values), evaluate(expr[3], values)
    return eval(f"a {OPS[expr[1]]} b", {}, {"a": a, "b": b})  # noqa: S307 - our operator


class Plan(NamedTuple):
    writes: dict  # (holder node_id, Relation) -> expr: the mock recomputes these
    type_only: set  # (holder node_id, Relation) of sources guarded by type only
    lists: dict  # node_id of an append-only list -> its length when the run read it
    dicts: dict = {}  # node_id of a dict used only by key -> {key read: present}


def plan(mon):
    """The replays a finished run may use (see the module docstring)."""
    r, g = mon.replays, mon.graph
    writes, type_only = {}, set()
    for (holder_id, rel), expr in r.writes.items():
        srcs = sources(expr)
        if not srcs or any(s in r.escaped for s in srcs):
            continue
        holder = g.get_node_by_id(holder_id)
        final = holder.versions[-1].refs.get(rel)
        try:
            value = evaluate(expr, r.values)
        except Exception:  # noqa: BLE001 - e.g. a division by zero: keep the guard
            continue
        final_value = plain(final.obj) if final is not None else None
        if final is None or type(final_value) is not type(value) or final_value != value:
            continue
        writes[(holder_id, rel)] = expr
        type_only.update(srcs)
    lists = {}
    for key, obj in r.appends.items():
        if key in r.escaped:
            continue
        node = g.get_node_by_var(obj)
        if node is None or node.new or not node.rewrite:
            continue
        initial = [n.obj for n in node.versions[0].refs.values()]
        if len(obj) < len(initial) or any(a is not b for a, b in zip(obj, initial)):
            continue
        if not _one_path(g, node, key):
            continue
        lists[node.node_id] = len(initial)
    dicts = {}
    for key, (obj, reads) in r.dicts.items():
        if key in r.escaped:
            continue
        node = g.get_node_by_var(obj)
        if node is None or node.new or node.rewrite or node.node_id in mon.lazy or \
                not _one_path(g, node, key):
            continue
        dicts[node.node_id] = reads
    return Plan(writes, type_only, lists, dicts)


def _one_path(g, node, key):
    """`node` is reached from outside only through the source `key` (holder, relation)."""
    incoming = sum(1 for n in g.sn for ref in n.versions[0].refs.values() if ref is node)
    return incoming == 1 and g.get_node_by_id(key[0]).versions[0].refs.get(key[1]) is node


__all__ = ["Relation", "Replays", "Tag", "plan"]
