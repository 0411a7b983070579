"""Read a running frame's value stack, which Python exposes to no Python API.

The opcode monitor needs each instruction's inputs (the operands on the value stack) and
outputs (what the instruction left on top of it). CPython 3.11 and 3.12 keep the stack right
after the locals in the frame's `_PyInterpreterFrame.localsplus` array (byte 72 of the
interpreter frame on 64-bit builds; `PyFrameObject` keeps its `f_frame` pointer at byte 24).
3.11 stores the stack depth (`stacktop`) before calling a trace function, 3.12 does not, so
the depth before each instruction is computed from the bytecode (`stack_depths`), the way
the compiler computes it. `stack_supported()` checks the offsets against a live frame.
"""
import ctypes
import dis
import functools
import sys
from _ctypes import PyObj_FromPtr

_F_FRAME = 24  # PyFrameObject.f_frame
_LOCALSPLUS = 72  # _PyInterpreterFrame.localsplus
# Where _PyInterpreterFrame keeps its code object, used only to validate the layout.
_F_CODE = {(3, 11): 32, (3, 12): 0}.get(sys.version_info[:2])

NULL = object()  # a NULL slot on the stack (e.g. the "no self" half of a method call)

_read_ptr = ctypes.c_void_p.from_address


def _interp(frame):
    return _read_ptr(id(frame) + _F_FRAME).value


def peek(frame, top, depth):
    """The object `depth` slots below the top of `frame`'s value stack (0 is the top);
    `top` is the stack's end as an index into localsplus (see `stack_top`)."""
    p = _read_ptr(_interp(frame) + _LOCALSPLUS + 8 * (top - 1 - depth)).value
    return NULL if not p else PyObj_FromPtr(p)


def peek_many(frame, top, n):
    """The top `n` stack slots, deepest first."""
    raw = (ctypes.c_void_p * n).from_address(_interp(frame) + _LOCALSPLUS + 8 * (top - n))
    return [NULL if not p else PyObj_FromPtr(p) for p in raw]


def n_localsplus(code):
    """How many localsplus slots come before the stack: locals, cells, free variables.
    An argument that is also a cell shares its slot."""
    varnames = set(code.co_varnames)
    return (len(code.co_varnames) + sum(1 for c in code.co_cellvars if c not in varnames)
            + len(code.co_freevars))


_NO_FALLTHROUGH = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                   "JUMP_ABSOLUTE", "JUMP", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS",
                   "RERAISE"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def stack_depths(code):
    """Per instruction index (offset // 2): the value-stack depth before it runs, or None
    for unreachable code. A worklist over jumps and exception handlers, as the compiler's
    own stack-depth pass."""
    instrs = list(dis.get_instructions(code))
    index = {ins.offset: i for i, ins in enumerate(instrs)}
    depths = [None] * (len(code.co_code) // 2)
    work = [(0, 0)]
    for entry in dis.Bytecode(code).exception_entries:
        work.append((entry.target, entry.depth + int(entry.lasti) + 1))
    while work:
        offset, depth = work.pop()
        i = index.get(offset)
        while i is not None and i < len(instrs):
            ins = instrs[i]
            slot = ins.offset // 2
            if depths[slot] is not None:
                break
            depths[slot] = depth
            arg = ins.arg if ins.opcode >= dis.HAVE_ARGUMENT else None
            if ins.opcode in _JUMPS:
                work.append((ins.argval, depth + dis.stack_effect(ins.opcode, arg, jump=True)))
            if ins.opname in _NO_FALLTHROUGH:
                break
            if ins.opname == "RETURN_GENERATOR":  # resumes with the sent value pushed
                effect = 1
            elif ins.opname == "PRECALL":  # 3.11: the compiler books CALL's pops here
                effect = 0
            elif ins.opname == "CALL" and sys.version_info < (3, 12):
                effect = -arg - 1
            elif ins.opcode in _JUMPS:
                effect = dis.stack_effect(ins.opcode, arg, jump=False)
            else:
                effect = dis.stack_effect(ins.opcode, arg)
            depth += effect
            i += 1
    return depths


def local_slot(frame, index):
    """`localsplus[index]` of `frame`: a local, a cell or a free variable, as the bytecode sees it."""
    p = _read_ptr(_interp(frame) + _LOCALSPLUS + 8 * index).value
    return NULL if not p else PyObj_FromPtr(p)


@functools.cache
def stack_supported():
    """True when this interpreter's frame layout is the one the offsets above describe
    (checked once per process; on any other layout capture runs every call eagerly)."""
    if _F_CODE is None or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    frame = sys._getframe()
    return _read_ptr(_interp(frame) + _F_CODE).value == id(frame.f_code)


# _PyInterpreterFrame's function object: f_func (3.11) / f_funcobj (3.12).
_F_FUNC = {(3, 11): 0, (3, 12): 16}.get(sys.version_info[:2])


def frame_function(frame):
    """The function object `frame` is running (None for module-level code)."""
    p = _read_ptr(_interp(frame) + _F_FUNC).value
    return None if not p else PyObj_FromPtr(p)
