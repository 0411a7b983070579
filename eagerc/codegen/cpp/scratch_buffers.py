"""Temporaries of a CPU artifact from a per-thread arena instead of the dispatcher.

Inductor's C++ wrapper allocates every buffer through ``aoti_torch_empty_strided``: a
dispatcher call and a new TensorImpl each, ~0.3-0.5 us. For a buffer that is neither an
output nor handed to another kernel as a tensor (softmax's row max and row sum, a
layer norm's statistics) only its memory is used: its one use is ``bufN.data_ptr()``
(and ``bufN.reset()`` when Inductor frees it early). Such a buffer becomes an
``eagerc_scratch``: memory bumped off a thread-local arena and given back when the wrapper
returns (C++ destroys the scratch objects in reverse order, so the arena is a stack; a
call that re-enters the same artifact on the same thread stacks on top). Larger
temporaries, or ones that do not fit while the arena is in use, get their own aligned
allocation, which is what ATen's CPU allocator would do for them too.

Inductor's memory planner also hands a freed temporary's memory to a later buffer
(``auto buf3 = ...reinterpret_tensor_wrapper(buf2, ...); buf2.reset();  // reuse``: a new
TensorImpl over the same storage). When the later buffer is memory-only too, it becomes a
second name for the same scratch memory (softmax's row sum, reused for its reciprocal).
"""
from __future__ import annotations

import re

from eagerc.compile.wrapper_source import after_header

# Element sizes of the dtypes Inductor's wrapper names as cached_torch_dtype_<name>.
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1}

_ALLOCATION = re.compile(
    r"^(?P<indent>[ \t]*)AtenTensorHandle (?P<buf>\w+)_handle;\n"
    r"[ \t]*AOTI_TORCH_ERROR_CODE_CHECK\(aoti_torch_empty_strided\((?P<ndim>\d+), (?P<sizes>\w+), "
    r"(?P<strides>\w+), cached_torch_dtype_(?P<dtype>\w+), cached_torch_device_type_cpu, 0, "
    r"&(?P=buf)_handle\)\);\n"
    r"[ \t]*RAIIAtenTensorHandle (?P=buf)\((?P=buf)_handle\);\n", re.M)

# A later buffer over a freed one's memory, from its start (Inductor's memory planner).
_REUSE = re.compile(
    r"^(?P<indent>[ \t]*)auto (?P<buf>\w+) = wrap_with_raii_handle_if_needed\("
    r"reinterpret_tensor_wrapper\((?P<old>\w+), \d+, \w+, \w+, 0L\)\); (?P=old)\.reset\(\);"
    r"(?P<comment>[ \t]*// reuse)?\n", re.M)

# 64 KiB per thread and artifact at most: small temporaries are where an allocation costs
# as much as the kernel; a large one's allocation is noise next to its compute.
_SCRATCH = r"""
#include <cstdlib>
#include <new>
namespace {
struct eagerc_scratch_arena {
  char* base = nullptr;
  size_t cap = 0;
  size_t top = 0;
  ~eagerc_scratch_arena() { std::free(base); }
};
thread_local eagerc_scratch_arena eagerc_arena;
constexpr size_t eagerc_arena_max = 64 * 1024;

class eagerc_scratch {
 public:
  eagerc_scratch(int64_t ndim, const int64_t* sizes, const int64_t* strides, size_t itemsize) {
    size_t extent = 1;
    for (int64_t i = 0; i < ndim; ++i) {
      if (sizes[i] == 0) { extent = 0; break; }
      extent += static_cast<size_t>(sizes[i] - 1) * static_cast<size_t>(strides[i]);
    }
    size_t n = (extent * itemsize + 63) & ~static_cast<size_t>(63);
    eagerc_scratch_arena& a = eagerc_arena;
    if (n <= eagerc_arena_max && a.top == 0 && n > a.cap) {  // nothing lives in it: grow
      std::free(a.base);
      a.cap = eagerc_arena_max;
      a.base = static_cast<char*>(std::aligned_alloc(64, a.cap));
      if (!a.base) { a.cap = 0; throw std::bad_alloc(); }
    }
    if (n <= a.cap - a.top) {
      ptr_ = a.base + a.top;
      taken_ = n;
      a.top += n;
    } else {
      ptr_ = std::aligned_alloc(64, n == 0 ? 64 : n);
      if (!ptr_) throw std::bad_alloc();
      owned_ = true;
    }
  }
  eagerc_scratch(const eagerc_scratch&) = delete;
  eagerc_scratch& operator=(const eagerc_scratch&) = delete;
  ~eagerc_scratch() {
    if (owned_) std::free(ptr_);
    else eagerc_arena.top -= taken_;
  }
  void* data_ptr() const { return ptr_; }
  void reset() {}  // Inductor frees early; the memory goes back when the wrapper returns

 private:
  void* ptr_ = nullptr;
  size_t taken_ = 0;
  bool owned_ = false;
};
}  // namespace
"""


def _only_memory_used(code: str, buf: str, reused_by: dict) -> bool:
    """Every use of `buf` after its allocation is `buf.data_ptr()`, `buf.reset();`, or
    handing its memory to a later buffer (`reused_by`) that is memory-only in turn."""
    if buf in reused_by:
        line, later = reused_by[buf]
        if not _only_memory_used(code, later, reused_by):
            return False
        code = code.replace(line, "")
    uses = re.findall(rf"\b{buf}\b(?!_handle)(\.\w+\(\))?", code)
    return all(use in (".data_ptr()", ".reset()") for use in uses[1:])


def scratch_buffers(code: str) -> str:
    """`code` with its memory-only CPU temporaries allocated as eagerc_scratch; the helper
    is inserted after the wrapper's header when any is."""
    reused_by = {m["old"]: (m[0], m["buf"]) for m in _REUSE.finditer(code)}
    scratch = set()

    def replace(m: re.Match) -> str:
        itemsize = _ITEMSIZE.get(m["dtype"])
        if itemsize is None or not _only_memory_used(code, m["buf"], reused_by):
            return m[0]
        buf = m["buf"]
        while buf is not None:  # the buffer and every later one over its memory
            scratch.add(buf)
            buf = reused_by.get(buf, (None, None))[1]
        return (f"{m['indent']}eagerc_scratch {m['buf']}({m['ndim']}, {m['sizes']}, "
                f"{m['strides']}, {itemsize});\n")

    def alias(m: re.Match) -> str:
        if m["old"] not in scratch:
            return m[0]
        return f"{m['indent']}eagerc_scratch& {m['buf']} = {m['old']};  // reuse: the same memory\n"

    rewritten = _REUSE.sub(alias, _ALLOCATION.sub(replace, code))
    if rewritten == code:
        return code
    start = after_header(code)
    return code[:start] + _SCRATCH + rewritten[start:]
