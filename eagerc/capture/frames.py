"""Read a running frame's value stack, which Python exposes to no Python API.

The opcode monitor needs each instruction's inputs (the operands on the value stack) and
outputs (what the instruction left on top of it). CPython 3.11 and 3.12 keep the stack in the
frame's `_PyInterpreterFrame.localsplus` array and store the stack depth (`stacktop`) before
calling a trace function, so both can be read through ctypes. Both versions put `stacktop` at
byte 64 and `localsplus` at byte 72 of the interpreter frame (64-bit builds); `PyFrameObject`
keeps its `f_frame` pointer at byte 24. `stack_supported()` checks those offsets against a
live frame before the monitor trusts them.
"""
import ctypes
import sys
from _ctypes import PyObj_FromPtr

_F_FRAME = 24  # PyFrameObject.f_frame
_STACKTOP = 64  # _PyInterpreterFrame.stacktop
_LOCALSPLUS = 72  # _PyInterpreterFrame.localsplus
# Where _PyInterpreterFrame keeps its code object, used only to validate the layout.
_F_CODE = {(3, 11): 32, (3, 12): 0}.get(sys.version_info[:2])

NULL = object()  # a NULL slot on the stack (e.g. the "no self" half of a method call)

_read_ptr = ctypes.c_void_p.from_address
_read_int = ctypes.c_int.from_address


def _interp(frame):
    return _read_ptr(id(frame) + _F_FRAME).value


def peek(frame, depth):
    """The object `depth` slots below the top of `frame`'s value stack (0 is the top)."""
    f = _interp(frame)
    top = _read_int(f + _STACKTOP).value
    p = _read_ptr(f + _LOCALSPLUS + 8 * (top - 1 - depth)).value
    return NULL if not p else PyObj_FromPtr(p)


def peek_many(frame, n):
    """The top `n` stack slots, deepest first."""
    f = _interp(frame)
    top = _read_int(f + _STACKTOP).value
    raw = (ctypes.c_void_p * n).from_address(f + _LOCALSPLUS + 8 * (top - n))
    return [NULL if not p else PyObj_FromPtr(p) for p in raw]


def local_slot(frame, index):
    """`localsplus[index]` of `frame`: a local, a cell or a free variable, as the bytecode sees it."""
    p = _read_ptr(_interp(frame) + _LOCALSPLUS + 8 * index).value
    return NULL if not p else PyObj_FromPtr(p)


def stack_supported():
    """True when this interpreter's frame layout is the one the offsets above describe."""
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
