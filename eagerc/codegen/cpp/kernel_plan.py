"""A CPU kernel's library without Inductor's wrapper code: its kernels, and an entry that
says the wrapper's few steps in plain C++ over the C shims, compiled on the kernels' own
precompiled header (cpp_prefix.h alone).

Why: the wrapper Inductor generates for a CPU kernel is glue (take the inputs, read sizes
and lifted scalars, allocate outputs and temporaries, call the cpp_fused_* kernels with data
pointers and sizes, return the outputs), but it is written against AOTInductor's runtime
header (RAII tensor handles, the error check that formats a message, the cached dtype and
device statics, Python.h for its import stub), so one_unit.py's unit also reads a
precompiled header of that runtime and compiles its templates. On an abs kernel (CPU
seconds, 2-core dev machine, clang 14, each build 9 times): the one unit 0.197, the same
kernels with this entry on cpp_prefix.h's header 0.164, the kernels alone 0.138.

What a wrapper may hold, statement by statement (anything else: Unsupported, and
one_unit.py builds the full unit, so a plan never guesses): its inputs in an array
(input_array.py), ``std::move`` of an input or a buffer, a lifted scalar read
(scalar_reads.py), an int64_t/double assigned an expression of known names, sizes and
strides of a tensor, int arrays, an allocation (direct_alloc.py's eagerc_empty_strided)
and its RAII handle, scratch buffers (scratch_buffers.py), a view (reinterpret_tensor),
a call of one of its own cpp_fused_* kernels (pointers and expressions), a reset, an
output. Its header part may hold only eagerc's own helper blocks and the kernels'
declarations. Expressions are copied as written (the unit includes cpp_prefix.h, whose
c10 helpers Inductor's expressions use), after every name in them is checked to be one
the entry defined.

The library keeps the wrapper's C ABI (csrc/artifact.cpp): eagerc_guard (the wrapper's
own, copied), eagerc_entry (steals its inputs), eagerc_entry_borrowed (reads them without
taking them: the holder then passes its own tensors), eagerc_set_allocator (direct_alloc),
and a module init for Inductor's import (declared here over CPython's stable ABI, as an
abi3 extension does, instead of reading Python.h: not on a free-threaded Python). A shim
call that fails throws std::runtime_error naming it, as the wrapper's check does.
``EAGERC_CPU_PLAN=0`` builds every library with its wrapper (A/B timing).
"""
from __future__ import annotations

import collections
import re
import sysconfig

from eagerc import _config
from eagerc.codegen.c_arguments import split_arguments

ENV = "EAGERC_CPU_PLAN"
# Libraries of this process built from a plan, and wrappers that had none (tests read them),
# with why, by reason.
counts = {"plan": 0, "no_plan": 0}
reasons: collections.Counter = collections.Counter()

_NAME = r"[A-Za-z_]\w*"
_INCLUDE = "#include <torch/csrc/inductor/cpp_wrapper/cpu.h>"
_ENTRY_BODY = re.compile(r"\nvoid inductor_entry_impl\(.*?\n\) \{\n(?P<body>.*?)\n\} // inductor_entry_impl\n",
                         re.S)
KERNEL_DECLARATION = re.compile(r'extern "C"\s+void\s+cpp_fused_\w+\([^;{}]*\);')
_CACHED = re.compile(rf"^CACHE_TORCH_(?:DTYPE|DEVICE)\({_NAME}\);$", re.M)
_TENSOR_CAST = re.compile(rf"\(((?:const )?[\w:<>, ]+\*)\)\(({_NAME})\.data_ptr\(\)\)")
_TOKEN = re.compile(r"[A-Za-z_][\w:]*|\d[\w.]*|\S")
# Names an expression may use besides those the entry defined: C++ and c10 spellings
# Inductor's C++ printer writes.
_KNOWN_WORDS = frozenset({"static_cast", "int64_t", "double", "c10::div_floor_integer", "std::max",
                          "std::min", "true", "false", "nullptr"})


class Unsupported(Exception):
    """A wrapper with something the plan does not say: build it whole."""


def enabled() -> bool:
    return _config.variable(ENV).strip() != "0"


# What the entry adds after the kernels (cpp_prefix.h declares the C shims).
_RUNTIME = r"""
// eagerc's entry for the kernels above (eagerc/codegen/cpp/kernel_plan.py).
[[noreturn]] __attribute__((noinline, cold)) static void eagerc_plan_failed(const char* what) {
  throw std::runtime_error(what);
}
#define EAGERC_PLAN_CHECK(call) \
  do { if ((call) != AOTI_TORCH_SUCCESS) eagerc_plan_failed(#call " API call failed at " __FILE__); } while (0)
namespace {
// A tensor handle the entry made (an allocation, a view): deleted when it leaves scope
// unless released (an output).
struct eagerc_owned {
  AtenTensorHandle h = nullptr;
  explicit eagerc_owned(AtenTensorHandle handle) : h(handle) {}
  eagerc_owned(const eagerc_owned&) = delete;
  eagerc_owned& operator=(const eagerc_owned&) = delete;
  ~eagerc_owned() { reset(); }
  void reset() {
    if (h != nullptr) aoti_torch_delete_tensor_object(h);
    h = nullptr;
  }
  AtenTensorHandle release() {
    AtenTensorHandle out = h;
    h = nullptr;
    return out;
  }
};
// The caller's input handles, deleted on the way out (eagerc_entry steals them).
struct eagerc_stolen {
  AtenTensorHandle* handles;
  int n;
  ~eagerc_stolen() {
    for (int i = 0; i < n; ++i) aoti_torch_delete_tensor_object(handles[i]);
  }
};
inline void* eagerc_data(AtenTensorHandle t) {
  void* p = nullptr;
  EAGERC_PLAN_CHECK(aoti_torch_get_data_ptr(t, &p));
  return p;
}
inline const int64_t* eagerc_sizes(AtenTensorHandle t) {
  int64_t* p = nullptr;
  EAGERC_PLAN_CHECK(aoti_torch_get_sizes(t, &p));
  return p;
}
inline const int64_t* eagerc_strides(AtenTensorHandle t) {
  int64_t* p = nullptr;
  EAGERC_PLAN_CHECK(aoti_torch_get_strides(t, &p));
  return p;
}
inline AtenTensorHandle eagerc_new_handle(AtenTensorHandle t) {
  AtenTensorHandle out = nullptr;
  EAGERC_PLAN_CHECK(aoti_torch_new_tensor_handle(t, &out));
  return out;
}
inline AtenTensorHandle eagerc_view(AtenTensorHandle t, int64_t ndim, const int64_t* sizes,
                                    const int64_t* strides, int64_t offset) {
  AtenTensorHandle out = nullptr;
  EAGERC_PLAN_CHECK(aoti_torch__reinterpret_tensor(t, ndim, sizes, strides, offset, &out));
  return out;
}
}  // namespace
"""

# Inductor imports the library as a module (eagerc calls it through eagerc_entry): CPython's
# stable ABI spelled out (PyModuleDef_HEAD_INIT's reference count 1, PyModule_Create's ABI
# version 3, METH_VARARGS 1), as an abi3 extension compiled against older headers has it.
_BINDING = r"""
extern "C" {
struct eagerc_py_object;
struct eagerc_py_method {
  const char* name;
  eagerc_py_object* (*call)(eagerc_py_object*, eagerc_py_object*);
  int flags;
  const char* doc;
};
struct eagerc_py_module_def {
  intptr_t refcnt; void* type; void* init; intptr_t index; void* copy;
  const char* name; const char* doc; intptr_t size; eagerc_py_method* methods;
  void* slots; void* traverse; void* clear; void* free;
};
eagerc_py_object* PyModule_Create2(eagerc_py_module_def* def, int api_version);
void PyErr_SetString(eagerc_py_object* type, const char* message);
extern eagerc_py_object* PyExc_RuntimeError;
}
static eagerc_py_object* eagerc_not_from_python(eagerc_py_object*, eagerc_py_object*) {
  PyErr_SetString(PyExc_RuntimeError, "eagerc's kernel holder calls this library, Python does not");
  return nullptr;
}
static eagerc_py_method eagerc_methods[] = {
    {"inductor_entry_cpp", eagerc_not_from_python, 1, ""}, {nullptr, nullptr, 0, nullptr}};
static eagerc_py_module_def eagerc_module = {
    1, nullptr, nullptr, 0, nullptr, "inductor_entry_cpp", nullptr, -1, eagerc_methods,
    nullptr, nullptr, nullptr, nullptr};
extern "C" __attribute__((visibility("default"))) eagerc_py_object* PyInit_inductor_entry_cpp(void) {
  return PyModule_Create2(&eagerc_module, 3);
}
"""


def entry_unit(wrapper: str) -> str:
    """The C++ that follows the kernels' code in a plan-built library of `wrapper` (a CPU
    wrapper as eagerc compiles it: eagerc's rewrites, eagerc_entry, eagerc_guard and the
    minimal Python binding appended). Raises Unsupported where the plan cannot say it."""
    from eagerc.codegen.cpp.glue_prelude import MINIMAL_BINDING
    from eagerc.compile.inductor_wrapper import _ENTRY

    if sysconfig.get_config_var("Py_GIL_DISABLED") or sysconfig.get_config_var("Py_TRACE_REFS"):
        raise Unsupported("a Python whose objects' layout is not the stable ABI's")
    if wrapper.count(_INCLUDE) != 1 or "#include <torch/csrc/inductor/cpp_wrapper/" in wrapper.replace(_INCLUDE, ""):
        raise Unsupported("not a wrapper of CPU kernels alone")
    entry = _ENTRY_BODY.search(wrapper)
    if entry is None:
        raise Unsupported("no inductor_entry_impl")
    tail = wrapper[entry.end():]
    binding = MINIMAL_BINDING.format(entry_func="inductor_entry_cpp")
    if not tail.startswith(_ENTRY) or not tail.endswith(binding):
        raise Unsupported("not eagerc's entry, guard and binding after the wrapper")
    guard = tail[len(_ENTRY):len(tail) - len(binding)]
    if 'extern "C" int eagerc_guard(' not in guard or "inductor_entry_impl" in guard:
        raise Unsupported("no eagerc_guard")
    header, kernels = _header_blocks(wrapper[:entry.start()])
    body = _Body(kernels)
    for line in _statements(entry.group("body")):
        body.statement(line)
    if body.inputs is None:
        raise Unsupported("an entry that does not take its inputs")
    lines = "\n".join(f"  {line}" for line in body.lines)
    return (f"{_RUNTIME}{header}\n"
            'extern "C" __attribute__((visibility("default"))) void eagerc_entry_borrowed('
            f"AtenTensorHandle* eagerc_in, AtenTensorHandle* eagerc_out) {{\n{lines}\n}}\n"
            'extern "C" __attribute__((visibility("default"))) void eagerc_entry('
            "AtenTensorHandle* inputs, AtenTensorHandle* outputs) {\n"
            f"  eagerc_stolen stolen{{inputs, {body.inputs}}};\n"
            "  eagerc_entry_borrowed(inputs, outputs);\n}\n"
            f"{guard}{_BINDING}")


def _header_blocks(header: str):
    """(The wrapper's header part as the entry needs it, the names of the kernels it
    declares): eagerc's helper blocks kept as written, the cpp_wrapper include and the
    cached dtype and device statics dropped; Unsupported where anything else is left."""
    from eagerc.codegen.cpp.scratch_buffers import _SCRATCH
    from eagerc.compile.direct_alloc import _POINTER
    from eagerc.compile.scalar_reads import _SCALAR_READS

    kept = []
    rest = _CACHED.sub("", header.replace(_INCLUDE, "", 1))
    for block in (_POINTER, _SCALAR_READS, _SCRATCH):
        if block in rest:
            kept.append(block)
            rest = rest.replace(block, "", 1)
    kernels = [re.search(r"cpp_fused_\w+", d).group(0) for d in KERNEL_DECLARATION.findall(rest)]
    rest = KERNEL_DECLARATION.sub("", rest)
    if rest.strip():
        raise Unsupported(f"wrapper header code {rest.strip()[:80]!r}")
    return "".join(kept), set(kernels)


def _statements(body: str) -> list:
    """The entry body's statements, one per line, comments and blank lines dropped."""
    out = []
    for raw in body.split("\n"):
        line = re.sub(r"//.*$", "", raw).strip()
        if line:
            out.append(line)
    return out


class _Body:
    """The wrapper's statements -> the entry's, tracking what each name is: a borrowed input
    ("input"), a handle the entry owns ("owned"), scratch memory ("scratch"), a scalar, an
    int array, a tensor's sizes or strides."""

    def __init__(self, kernels: set):
        self.kernels = kernels
        self.inputs = None
        self.tensors = {}
        self.scalars = set()
        self.declared = set()     # scalars declared, to be read by the next statement
        self.arrays = set()
        self.pending = set()      # bufN of `AtenTensorHandle bufN_handle;`
        self.allocated = set()    # bufN whose handle an allocation filled
        self.outputs = set()
        self.lines = []

    def expr(self, text: str) -> str:
        """`text` where every name in it is one the entry defined (or _KNOWN_WORDS)."""
        words = set(self.scalars) | self.arrays
        for token in _TOKEN.findall(text):
            if token[0].isalpha() or token[0] == "_":
                if token not in words and token not in _KNOWN_WORDS:
                    raise Unsupported(f"name {token!r} in {text!r}")
            elif token[0].isdigit():
                if not re.fullmatch(r"\d+L{0,2}|\d+\.\d*(?:e[-+]?\d+)?", token):
                    raise Unsupported(f"literal {token!r}")
            elif token not in "+-*/%()<>=!?&|^~[],.{}" :
                raise Unsupported(f"token {token!r} in {text!r}")
        if "." in re.sub(r"\d\.\d", "", text):
            raise Unsupported(f"member access in {text!r}")
        return text

    def handle(self, name: str) -> str:
        kind = self.tensors.get(name)
        if kind == "input":
            return name
        if kind == "owned":
            return f"{name}.h"
        raise Unsupported(f"{name!r} is not a tensor handle")

    def new_name(self, name: str) -> str:
        if name in self.tensors or name in self.scalars or name in self.arrays or name.startswith("eagerc_"):
            raise Unsupported(f"{name!r} defined twice")
        return name

    def statement(self, line: str) -> None:  # noqa: C901 - one branch per statement kind
        m = re.fullmatch(r"RAIIAtenTensorHandle inputs\[(\d+)\] = \{(.*)\};", line)
        if m and self.inputs is None:
            n = int(m.group(1))
            if m.group(2) != ", ".join(f"RAIIAtenTensorHandle(input_handles[{i}])" for i in range(n)):
                raise Unsupported(f"inputs {line!r}")
            self.inputs = n
            return
        if line == "auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 0);" and self.inputs is None:
            self.inputs = 0  # input_array.py leaves an entry without inputs as it is
            return
        if self.inputs is None:
            raise Unsupported(f"statement before the inputs: {line!r}")
        m = re.fullmatch(rf"auto ({_NAME}) = std::move\((?:inputs\[(\d+)\]|({_NAME}))\);", line)
        if m:
            name = self.new_name(m.group(1))
            if m.group(2) is not None:
                if int(m.group(2)) >= self.inputs:
                    raise Unsupported(f"input {m.group(2)} of {self.inputs}")
                self.tensors[name] = "input"
                self.lines.append(f"AtenTensorHandle {name} = eagerc_in[{m.group(2)}];")
                return
            source = m.group(3)
            kind = self.tensors.get(source)
            if kind == "input":
                self.tensors[name] = "input"
                self.lines.append(f"AtenTensorHandle {name} = {source};")
            elif kind == "owned":
                self.tensors[name] = "owned"
                self.lines.append(f"eagerc_owned {name}({source}.release());")
            else:
                raise Unsupported(f"move of {source!r}")
            return
        m = re.fullmatch(rf"(int64_t|double) ({_NAME});", line)
        if m:
            self.declared.add(self.new_name(m.group(2)))
            self.lines.append(line)
            return
        m = re.fullmatch(rf"AOTI_TORCH_ERROR_CODE_CHECK\(eagerc_item_(int64|float64)\("
                         rf"(?:inputs\[(\d+)\]|({_NAME})), &({_NAME})\)\);", line)
        if m and m.group(4) in self.declared:
            if m.group(2) is not None and int(m.group(2)) >= self.inputs:
                raise Unsupported(f"input {m.group(2)} of {self.inputs}")
            source = f"eagerc_in[{m.group(2)}]" if m.group(2) is not None else self.handle(m.group(3))
            self.declared.discard(m.group(4))
            self.scalars.add(m.group(4))
            self.lines.append(f"EAGERC_PLAN_CHECK(eagerc_item_{m.group(1)}({source}, &{m.group(4)}));")
            return
        m = re.fullmatch(rf"(int64_t|double) ({_NAME}) = (.+);", line)
        if m:
            value = self.expr(m.group(3))
            self.scalars.add(self.new_name(m.group(2)))
            self.lines.append(f"{m.group(1)} {m.group(2)} = {value};")
            return
        m = re.fullmatch(rf"auto ({_NAME}) = ({_NAME});", line)
        if m and m.group(2) in self.scalars:
            self.scalars.add(self.new_name(m.group(1)))
            self.lines.append(f"const auto {m.group(1)} = {m.group(2)};")
            return
        m = re.fullmatch(rf"auto ({_NAME})_(size|stride) = \1\.(sizes|strides)\(\);", line)
        if m and m.group(2) + "s" == m.group(3):
            name = self.new_name(f"{m.group(1)}_{m.group(2)}")
            self.arrays.add(name)
            self.lines.append(f"const int64_t* {name} = eagerc_{m.group(3)}({self.handle(m.group(1))});")
            return
        m = re.fullmatch(rf"(const|static constexpr) int64_t ({_NAME})\[\] = \{{(.*)\}};", line)
        if m:
            values = self.expr(m.group(3))
            self.arrays.add(self.new_name(m.group(2)))
            self.lines.append(f"{m.group(1)} int64_t {m.group(2)}[] = {{{values}}};")
            return
        m = re.fullmatch(rf"static constexpr int64_t \*({_NAME})\s*=\s*nullptr;", line)
        if m:  # the sizes and strides of a 0-dim buffer
            self.arrays.add(self.new_name(m.group(1)))
            self.lines.append(f"static constexpr const int64_t* {m.group(1)} = nullptr;")
            return
        m = re.fullmatch(rf"AtenTensorHandle ({_NAME})_handle;", line)
        if m:
            self.pending.add(self.new_name(m.group(1)))
            return
        m = re.fullmatch(rf"AOTI_TORCH_ERROR_CODE_CHECK\(eagerc_empty_strided\((\d+), ({_NAME}), ({_NAME}), "
                         rf"cached_torch_dtype_(\w+), cached_torch_device_type_(\w+), (\d+), &({_NAME})_handle\)\);",
                         line)
        if m and m.group(7) in self.pending and m.group(2) in self.arrays and m.group(3) in self.arrays:
            buf = m.group(7)
            self.pending.discard(buf)
            self.allocated.add(buf)
            self.lines.append(f"AtenTensorHandle {buf}_handle = nullptr;")
            self.lines.append(f"EAGERC_PLAN_CHECK(eagerc_empty_strided({m.group(1)}, {m.group(2)}, {m.group(3)}, "
                              f"aoti_torch_dtype_{m.group(4)}(), aoti_torch_device_type_{m.group(5)}(), "
                              f"{m.group(6)}, &{buf}_handle));")
            return
        m = re.fullmatch(rf"RAIIAtenTensorHandle ({_NAME})\(\1_handle\);", line)
        if m and m.group(1) in self.allocated:
            self.allocated.discard(m.group(1))
            self.tensors[m.group(1)] = "owned"
            self.lines.append(f"eagerc_owned {m.group(1)}({m.group(1)}_handle);")
            return
        m = re.fullmatch(rf"eagerc_scratch ({_NAME})\((\d+), ({_NAME}), ({_NAME}), (\d+)\);", line)
        if m and m.group(3) in self.arrays and m.group(4) in self.arrays:
            self.tensors[self.new_name(m.group(1))] = "scratch"
            self.lines.append(line)
            return
        m = re.fullmatch(rf"eagerc_scratch& ({_NAME}) = ({_NAME});", line)
        if m and self.tensors.get(m.group(2)) == "scratch":
            self.tensors[self.new_name(m.group(1))] = "scratch"
            self.lines.append(line)
            return
        m = re.fullmatch(rf"auto ({_NAME}) = wrap_with_raii_handle_if_needed\(reinterpret_tensor_wrapper\(({_NAME}), "
                         rf"(\d+), ({_NAME}), ({_NAME}), (.+?)\)\);( \2\.reset\(\);)?", line)
        if m and m.group(4) in self.arrays and m.group(5) in self.arrays:
            source = self.handle(m.group(2))
            offset = self.expr(m.group(6))
            name = self.new_name(m.group(1))
            self.lines.append(f"eagerc_owned {name}(eagerc_view({source}, {m.group(3)}, {m.group(4)}, "
                              f"{m.group(5)}, {offset}));")
            self.tensors[name] = "owned"
            if m.group(7):
                self.reset(m.group(2))
            return
        m = re.fullmatch(rf"({_NAME})\((.*)\);", line)
        if m and m.group(1) in self.kernels:
            self.lines.append(f"{m.group(1)}({', '.join(self.argument(a) for a in split_arguments(m.group(2)))});")
            return
        m = re.fullmatch(rf"({_NAME})\.reset\(\);", line)
        if m:
            self.reset(m.group(1))
            return
        m = re.fullmatch(rf"output_handles\[(\d+)\] = ({_NAME})\.release\(\);", line)
        if m and m.group(1) not in self.outputs:
            self.outputs.add(m.group(1))
            name, kind = m.group(2), self.tensors.get(m.group(2))
            if kind == "owned":
                self.lines.append(f"eagerc_out[{m.group(1)}] = {name}.release();")
            elif kind == "input":  # the caller's handle is borrowed: the output is a new one
                self.lines.append(f"eagerc_out[{m.group(1)}] = eagerc_new_handle({name});")
            else:
                raise Unsupported(f"output {name!r}")
            self.tensors.pop(name)  # released: no later use
            return
        raise Unsupported(f"statement {line!r}")

    def reset(self, name: str) -> None:
        kind = self.tensors.get(name)
        if kind == "owned":
            self.lines.append(f"{name}.reset();")
        elif kind not in ("input", "scratch"):  # a borrowed input stays the caller's; scratch goes at return
            raise Unsupported(f"reset of {name!r}")

    def argument(self, text: str) -> str:
        m = _TENSOR_CAST.fullmatch(text)
        if m:
            name = m.group(2)
            if self.tensors.get(name) == "scratch":
                return text
            return f"({m.group(1)})(eagerc_data({self.handle(name)}))"
        return self.expr(text)
