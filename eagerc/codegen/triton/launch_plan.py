"""A GPU wrapper whose kernels are all Triton's (or ATen's mm family and convolution:
EXTERNS) -> a launch plan: the same steps as data, which eagerc's plan launcher
(plan_launcher/, built once per machine) runs.

Why: compiling each op's wrapper with g++ costs 0.3-0.4 s of a ~0.8 s cold compile on the
H100 (docs/benchmarks.md), and no two ops' wrappers are alike enough to share one build
(in a 12-op set every pair differs in shapes, guard, tuning constants, arity). What a
Triton-only wrapper does is a short straight line of a dozen kinds of statement: take the
inputs, read sizes and scalars, open the device guard, allocate buffers (sizes and strides
from symbols), make views, fetch the current stream, launch kernels (grid, warps, shared
memory, arguments) or call cuBLAS or cuDNN, return outputs. This module reads that code (Inductor's JIT C++ wrapper
after eagerc's rewrites) statement by statement, with its guard, and writes each statement
as one line of the plan. Any statement it does not know exactly makes it give up
(Unsupported): that wrapper is compiled as before, so a plan never guesses.

The plan is text, one step per line (plan_launcher/parse.cpp reads it once per library):
    eagerc-launch-plan 1
    inputs N | slots S | ints R | doubles D      sizes of the launcher's tables
    kernel K CUBIN SHM NAME                      kernel K: cubin CUBIN's function NAME
    item_i R SLOT | item_d R SLOT                register R = the scalar in SLOT (0-dim, host)
    seti R E | setd R E                          register R = expression E (cexpr's form)
    device IDX                                   the device guard (and a current context)
    alloc SLOT DTYPE DEVTYPE IDX NDIM E*NDIM E*NDIM   a buffer: sizes then strides
    view SLOT SRC NDIM E*NDIM E*NDIM OFFSET       a view of SRC's storage
    move DST SRC | reset SLOT                    hand a handle on / delete it
    stream IDX                                   the current stream of device IDX
    launch K WARPS SHM GX GY GZ N ARG*N          ARG: p:SLOT, null, i32:E, i64:E, u32:E,
                                                 f32:E, f64:E
    extern NAME N ARG*N                          one of EXTERNS; ARG: h:SLOT, i:E, b:E
                                                 (int32_t), d:E, o:SLOT or o:- (an
                                                 optional handle), a:E;E;... (an int
                                                 array), r:SLOT (a returned handle)
    out I SLOT                                   output I = SLOT's handle
    check E                                      a guard term (all must be nonzero)
"""
from __future__ import annotations

import re

from eagerc.codegen.triton.cexpr import Compiler, Unsupported
from eagerc.codegen.triton.gpu_context import make_context_current
from eagerc.codegen.c_arguments import split_arguments
from eagerc.codegen.triton.plan_externs import EXTERNS, NAME as _NAME, extern_step

VERSION = 1

_CUBIN = re.compile(r'\.globl (eagerc_cubin_\d+)\\n\.hidden \1\\n\1:\\n\.incbin \\"(?P<path>[^"\\]+)\\"')
_ENTRY_BODY = re.compile(r"\nvoid inductor_entry_impl\(.*?\n\) \{\n(?P<body>.*?)\n\} // inductor_entry_impl",
                         re.S)
_GUARD_BODY = re.compile(r'\nextern "C" int eagerc_guard\(const int64_t\* I, const double\* F\) \{\n'
                         r"(?P<body>.*?)\n\}\n", re.S)
_LAUNCHER = re.compile(r"\nstatic inline void call_(?P<name>\w+)\(\n(?P<params>.*?)\n\)\{\n(?P<body>.*?)\n\}\n",
                       re.S)
_ENTRY_CALL = 'extern "C" void eagerc_entry(AtenTensorHandle* inputs, AtenTensorHandle* outputs) {\n' \
              "  inductor_entry_impl(inputs, outputs);\n}"
_DEVICE_GUARD = make_context_current("AOTICudaGuard device_guard(@);")
_ARG_TYPES = {"int32_t": "i32", "int64_t": "i64", "uint32_t": "u32", "float": "f32", "double": "f64"}
_DTYPE = re.compile(r"cached_torch_dtype_(\w+)$")
_DEVICE_TYPE = re.compile(r"cached_torch_device_type_(cpu|cuda|privateuse1)$")


def plan_of(code: str) -> str:
    """The launch plan of `code` (a GPU wrapper as eagerc compiles it: cubins embedded,
    eagerc_entry and eagerc_guard appended). Raises Unsupported where it has a statement
    the plan cannot say."""
    cubins = cubin_paths(code)
    entry = _ENTRY_BODY.search(code)
    guard = _GUARD_BODY.search(code)
    if entry is None or guard is None or _ENTRY_CALL not in code:
        raise Unsupported("not a wrapper with eagerc's entry and guard")
    launchers = {m.group("name"): m for m in _LAUNCHER.finditer(code)}
    body = _Body({name: _launcher(m) for name, m in launchers.items()}, len(cubins))
    for line in _statements(entry.group("body")):
        body.statement(line)
    checks = _guard_checks(guard.group("body"))
    header = [f"eagerc-launch-plan {VERSION}", f"inputs {body.inputs}", f"slots {body.slots}",
              f"ints {len(body.ints)}", f"doubles {len(body.doubles)}"]
    header += [f"kernel {k} {cubin} {shm} {name}" for name, (k, cubin, shm) in body.kernels.items()]
    _within_limits({"slots": body.slots, "ints": len(body.ints), "doubles": len(body.doubles),
                    "stack": max([body.deepest, *map(_depth, checks)]), "arguments": body.most_arguments,
                    "rank": body.highest_rank})
    return "\n".join(header + _without_unread_sets(body.steps) + [f"check {c}" for c in checks]) + "\n"


def _without_unread_sets(steps: list) -> list:
    """`steps` without the register sets nothing reads: the wrapper names every size of
    its inputs (a convolution's six, each a call into libtorch per call), most of which
    only its guard, not its body, uses."""
    while True:
        read = set().union(*(_registers_read(step) for step in steps))
        kept = [step for step in steps if step.split()[0] not in ("seti", "setd")
                or ("r" if step.startswith("seti") else "f", step.split()[1]) in read]
        if len(kept) == len(steps):
            return steps
        steps = kept


def _registers_read(step: str) -> set:
    """The registers a plan step's expressions read, as ("r"|"f", index) pairs."""
    words = step.split()
    if words[0] in ("seti", "setd"):
        texts = words[2:]
    elif words[0] == "extern":  # h:, o:, r: name slots; the other arguments are expressions
        texts = [w[2:] for w in words[3:] if w[:2] not in ("h:", "o:", "r:")]
    else:
        texts = words[1:]
    return {m for text in texts for m in re.findall(r"(?:^|[,;:])([rf]):(\d+)", text)}


# The launcher's fixed table sizes (plan_launcher/plan.h's kMax*): a plan beyond them would
# not load, so such a wrapper is compiled instead.
LIMITS = {"slots": 64, "ints": 256, "doubles": 64, "stack": 64, "arguments": 64, "rank": 64}


def _within_limits(sizes: dict) -> None:
    for name, size in sizes.items():
        if size > LIMITS[name]:
            raise Unsupported(f"a plan with {size} {name} (the launcher takes {LIMITS[name]})")


def _depth(program: str) -> int:
    """The stack depth a postfix program (cexpr's form) reaches."""
    depth = deepest = 0
    for op in program.split(","):
        if ":" in op:
            depth += 1
        elif op not in ("!", "negi", "negd", "i2d", "d2i", "d2b"):
            depth -= 1
        deepest = max(deepest, depth)
    return deepest


def cubin_paths(code: str) -> list:
    """The cubin files `code` embeds, in symbol order (eagerc_cubin_0, 1, ...)."""
    return [path for _, path in _CUBIN.findall(code)]


def _statements(body: str) -> list:
    """The body's statements, one per line, comments and blank lines dropped."""
    out = []
    for raw in body.split("\n"):
        line = raw.strip()
        if _DEVICE_GUARD.split("@")[1] in line:  # the guard line carries braces of its own
            out.append(line)
            continue
        line = re.sub(r"//.*$", "", line).strip()
        if line:
            out.append(line)
    return out


class _Launcher:
    def __init__(self, params, grid, kernel, cubin, shm, warps, args):
        self.params, self.grid, self.kernel = params, grid, kernel
        self.cubin, self.shm, self.warps, self.args = cubin, shm, warps, args


def _launcher(match) -> _Launcher:
    """A ``call_<kernel>`` function: its parameters, grid, kernel and argument list."""
    params = []
    for raw in match.group("params").split(",\n"):
        p = raw.strip()
        tensor = re.fullmatch(rf"const ({_NAME})_type_& \1", p)
        scalar = re.fullmatch(rf"(int64_t|double) ({_NAME})", p)
        if tensor:
            params.append(("tensor", tensor.group(1)))
        elif scalar:
            params.append(("i" if scalar.group(1) == "int64_t" else "d", scalar.group(2)))
        elif p == "int32_t device_idx_":
            params.append(("device", p))
        elif p == "cudaStream_t stream_":
            params.append(("stream", p))
        elif p != "const std::optional<std::string>& cubin_dir_ = std::nullopt":
            raise Unsupported(f"launcher parameter {p!r}")
    grid, variables, args, kernel, cubin, shm, warps = {}, {}, None, None, None, None, None
    name = match.group("name")
    for line in _statements(match.group("body")):
        m = re.fullmatch(r"uint32_t grid_([012]) = (.+);", line)
        if m:
            grid[int(m.group(1))] = m.group(2)
            continue
        if line in ("if (grid_0 == 0 || grid_1 == 0 || grid_2 == 0) return;", f"if ({name} == nullptr) {{", "}"):
            continue
        m = re.fullmatch(rf'{name} = loadKernel\(eagerc_cubin_(\d+), "{name}", (\d+)\);', line)
        if m:
            kernel, cubin, shm = name, int(m.group(1)), int(m.group(2))
            continue
        m = re.fullmatch(rf"CUdeviceptr ({_NAME}) = reinterpret_cast<CUdeviceptr>\(({_NAME})\.data_ptr\(\)\);", line)
        if m:
            variables[m.group(1)] = ("p", m.group(2))
            continue
        m = re.fullmatch(rf"CUdeviceptr ({_NAME}) = 0;", line)
        if m:
            variables[m.group(1)] = ("null", None)
            continue
        m = re.fullmatch(rf"(int32_t|int64_t|uint32_t|float|double) ({_NAME}) = (.+);", line)
        if m:
            variables[m.group(2)] = (_ARG_TYPES[m.group(1)], m.group(3))
            continue
        m = re.fullmatch(r"void\* kernel_args_\[\] = \{(.*)\};", line)
        if m:
            names = [a.strip() for a in m.group(1).split(",")]
            if not all(a.startswith("&") and a[1:] in variables for a in names):
                raise Unsupported(f"kernel arguments {line!r}")
            args = [variables[a[1:]] for a in names]
            continue
        m = re.fullmatch(rf"launchKernel\({name}, grid_0, grid_1, grid_2, (\d+), (\d+), kernel_args_, stream_\);", line)
        if m:
            warps = int(m.group(1))
            if int(m.group(2)) != shm:
                raise Unsupported("launch and load disagree on shared memory")
            continue
        raise Unsupported(f"launcher statement {line!r}")
    if None in (args, kernel, warps) or sorted(grid) != [0, 1, 2]:
        raise Unsupported(f"launcher {name} is incomplete")
    return _Launcher(params, grid, kernel, cubin, shm, warps, args)


class _Body:
    """The entry's statements -> plan steps, tracking names: tensors (slots), int and
    double registers, int arrays, size and stride arrays."""

    def __init__(self, launchers: dict, n_cubins: int):
        self.launchers, self.n_cubins = launchers, n_cubins
        self.inputs = None
        self.slots = 0
        self.tensors = {}          # name -> slot
        self.ints, self.doubles = {}, {}
        self.arrays = {}           # int array name -> [expression text]
        self.shapes = {}           # name_size / name_stride -> (kind, slot)
        self.pending = {}          # bufN_handle -> slot allocated into it
        self.kernels = {}          # kernel name -> (index, cubin, shm)
        self.steps = []
        self.device = None
        self.stream = None
        self.deepest = self.most_arguments = self.highest_rank = 0  # checked against LIMITS

    def compiler(self) -> Compiler:
        names = {n: (f"r:{i}", "i") for n, i in self.ints.items()}
        names.update({n: (f"f:{i}", "d") for n, i in self.doubles.items()})
        arrays = {}
        for name, (kind, slot) in self.shapes.items():
            op = "z" if kind == "size" else "t"
            arrays[name] = lambda d, op=op, slot=slot: (f"{op}:{slot}:{d}", "i")
        return Compiler(names, arrays)

    def expr(self, text: str, want: str) -> str:
        code = self.compiler().compile(text, want)
        self.deepest = max(self.deepest, _depth(code))
        return code

    def slot(self, name: str) -> int:
        if name not in self.tensors:
            raise Unsupported(f"unknown tensor {name!r}")
        return self.tensors[name]

    def new_slot(self, name: str) -> int:
        self.tensors[name] = self.slots
        self.slots += 1
        return self.tensors[name]

    def register(self, name: str, kind: str) -> str:
        table = self.ints if kind == "i" else self.doubles
        if name in self.ints or name in self.doubles:
            raise Unsupported(f"{name} assigned twice")
        table[name] = len(table)
        return f"{len(table) - 1}"

    def shape_exprs(self, ndim: int, sizes: str, strides: str) -> list:
        self.highest_rank = max(self.highest_rank, ndim)
        exprs = []
        for array in (sizes, strides):
            values = self.arrays.get(array)
            if values is None or len(values) != ndim:
                raise Unsupported(f"int array {array!r} of {ndim} values")
            exprs += [self.expr(v, "i") for v in values]
        return exprs

    def statement(self, line: str) -> None:  # noqa: C901 - one branch per statement kind
        m = re.fullmatch(r"auto inputs = steal_from_raw_handles_to_raii_handles\(input_handles, (\d+)\);", line)
        if m and self.inputs is None:
            self.inputs = self.slots = int(m.group(1))
            return
        if self.inputs is None:
            raise Unsupported(f"statement before the inputs: {line!r}")
        m = re.fullmatch(rf"auto ({_NAME}) = std::move\(inputs\[(\d+)\]\);", line)
        if m and int(m.group(2)) < self.inputs:
            self.tensors[m.group(1)] = int(m.group(2))
            return
        m = re.fullmatch(rf"(int64_t|double) ({_NAME});", line)
        if m:
            return  # declared here, read by the next statement (item)
        m = re.fullmatch(rf"AOTI_TORCH_ERROR_CODE_CHECK\(eagerc_item_(int64|float64)\((?:inputs\[(\d+)\]|({_NAME}))"
                         rf", &({_NAME})\)\);", line)
        if m and (m.group(3) or int(m.group(2)) < self.inputs):
            kind = "i" if m.group(1) == "int64" else "d"
            slot = self.slot(m.group(3)) if m.group(3) else int(m.group(2))
            self.steps.append(f"item_{kind} {self.register(m.group(4), kind)} {slot}")
            return
        m = re.fullmatch(rf"(int64_t|double) ({_NAME}) = (.+);", line)
        if m:
            kind = "i" if m.group(1) == "int64_t" else "d"
            value = self.expr(m.group(3), kind)
            self.steps.append(f"set{kind} {self.register(m.group(2), kind)} {value}")
            return
        m = re.fullmatch(rf"auto ({_NAME}) = ({_NAME});", line)
        if m and (m.group(2) in self.ints or m.group(2) in self.doubles):  # a scalar's copy
            kind = self.compiler().type_of(m.group(2))
            self.steps.append(f"set{kind} {self.register(m.group(1), kind)} {self.expr(m.group(2), kind)}")
            return
        m = re.fullmatch(rf"auto ({_NAME})_(size|stride) = \1\.(sizes|strides)\(\);", line)
        if m and m.group(2) + "s" == m.group(3):
            self.shapes[f"{m.group(1)}_{m.group(2)}"] = (m.group(2), self.slot(m.group(1)))
            return
        m = re.fullmatch(r"AOTICudaGuard device_guard\((\d+)\);(.*)", line)
        if m and line == _DEVICE_GUARD.replace("@", m.group(1)) and self.device is None:
            self.device = int(m.group(1))
            self.steps.append(f"device {self.device}")
            return
        m = re.fullmatch(rf"(?:const|static constexpr) int64_t ({_NAME})\[\] = \{{(.*)\}};", line)
        if m:
            self.arrays[m.group(1)] = split_arguments(m.group(2))
            return
        m = re.fullmatch(rf"static constexpr int64_t \*({_NAME})\s*=\s*nullptr;", line)
        if m:  # the sizes and strides of a 0-dim buffer
            self.arrays[m.group(1)] = []
            return
        m = re.fullmatch(rf"AtenTensorHandle ({_NAME})_handle;", line)
        if m:
            self.pending[m.group(1)] = None
            return
        m = re.fullmatch(rf"AOTI_TORCH_ERROR_CODE_CHECK\(eagerc_empty_strided\((\d+), ({_NAME}), ({_NAME}), "
                         rf"({_NAME}), ({_NAME}),\s+(\d+), &({_NAME})_handle\)\);", line)
        if m and m.group(7) in self.pending and self.pending[m.group(7)] is None:
            dtype, devtype = _DTYPE.match(m.group(4)), _DEVICE_TYPE.match(m.group(5))
            if dtype is None or devtype is None:
                raise Unsupported(f"allocation {line!r}")
            slot = self.slots
            self.slots += 1
            self.pending[m.group(7)] = slot
            exprs = self.shape_exprs(int(m.group(1)), m.group(2), m.group(3))
            self.steps.append(" ".join(["alloc", str(slot), dtype.group(1), devtype.group(1), m.group(6),
                                        m.group(1), *exprs]))
            return
        m = re.fullmatch(rf"RAIIAtenTensorHandle ({_NAME})\(\1_handle\);", line)
        if m and self.pending.get(m.group(1)) is not None:
            self.tensors[m.group(1)] = self.pending.pop(m.group(1))
            return
        m = re.fullmatch(rf"auto ({_NAME}) = wrap_with_raii_handle_if_needed\(reinterpret_tensor_wrapper\(({_NAME}), "
                         rf"(\d+), ({_NAME}), ({_NAME}), (.+?)\)\);(?: \2\.reset\(\);)?", line)
        if m:
            source = self.slot(m.group(2))
            exprs = self.shape_exprs(int(m.group(3)), m.group(4), m.group(5))
            offset = self.expr(m.group(6), "i")
            slot = self.new_slot(m.group(1))
            self.steps.append(" ".join(["view", str(slot), str(source), m.group(3), *exprs, offset]))
            if line.endswith(".reset();"):
                self.steps.append(f"reset {source}")
            return
        m = re.fullmatch(rf"auto ({_NAME}) = std::move\(({_NAME})\);", line)
        if m:
            source = self.slot(m.group(2))
            slot = self.new_slot(m.group(1))
            self.steps.append(f"move {slot} {source}")
            return
        m = re.fullmatch(rf"cudaStream_t ({_NAME});", line)
        if m and self.stream is None:
            self.stream = m.group(1)
            return
        m = re.fullmatch(rf"AOTI_TORCH_ERROR_CODE_CHECK\(aoti_torch_get_current_cuda_stream\((\d+), "
                         rf"\(void\*\*\)&({_NAME})\)\);", line)
        if m and m.group(2) == self.stream:
            self.steps.append(f"stream {m.group(1)}")
            return
        m = re.fullmatch(rf"call_({_NAME})\((.*)\);", line)
        if m and m.group(1) in self.launchers:
            self.launch(self.launchers[m.group(1)], split_arguments(m.group(2)))
            return
        m = re.fullmatch(r"AOTI_TORCH_ERROR_CODE_CHECK\((aoti_torch_cuda_\w+)\((.*)\)\);", line)
        if m and m.group(1) in EXTERNS:
            if self.device is None:
                raise Unsupported(f"{m.group(1)} before the device guard")
            self.steps.append(extern_step(self, m.group(1), m.group(2)))
            return
        m = re.fullmatch(rf"({_NAME})\.reset\(\);", line)
        if m:
            self.steps.append(f"reset {self.slot(m.group(1))}")
            return
        m = re.fullmatch(rf"output_handles\[(\d+)\] = ({_NAME})\.release\(\);", line)
        if m:
            self.steps.append(f"out {m.group(1)} {self.slot(m.group(2))}")
            return
        raise Unsupported(f"statement {line!r}")

    def launch(self, launcher: _Launcher, call_args: list) -> None:
        if len(call_args) != len(launcher.params) or self.stream is None or self.device is None:
            raise Unsupported(f"call of {launcher.kernel} with {len(call_args)} arguments")
        tensors, scalars = {}, {}
        for (kind, name), arg in zip(launcher.params, call_args):
            if kind == "tensor":
                tensors[name] = self.slot(arg)
            elif kind in ("i", "d"):
                scalars[name] = (arg, kind)
            elif kind == "device" and arg != str(self.device):
                raise Unsupported("a launch on another device than the guard's")
            elif kind == "stream" and arg != self.stream:
                raise Unsupported("a launch on another stream")
        # The launcher's parameters stand for the caller's expressions (parenthesized).
        names = {n: (f"({a})", k) for n, (a, k) in scalars.items()}

        def inline(text: str) -> str:
            return re.sub(rf"\b({'|'.join(map(re.escape, names)) or '$^'})\b", lambda m: names[m.group(1)][0], text)

        for name, (arg, kind) in scalars.items():
            declared = self.compiler().type_of(arg)
            if declared != kind and kind == "i":  # a double passed as int64_t would truncate
                raise Unsupported(f"a double argument for {name}")
        if launcher.kernel not in self.kernels:
            if launcher.cubin >= self.n_cubins:
                raise Unsupported(f"kernel {launcher.kernel} has no embedded cubin")
            self.kernels[launcher.kernel] = (len(self.kernels), launcher.cubin, launcher.shm)
        grid = [self.expr(inline(launcher.grid[i]), "i") for i in range(3)]
        args = []
        for kind, value in launcher.args:
            if kind == "p":
                if value not in tensors:
                    raise Unsupported(f"pointer of {value!r}")
                args.append(f"p:{tensors[value]}")
            elif kind == "null":
                args.append("null")
            else:
                want = "d" if kind in ("f32", "f64") else "i"
                args.append(f"{kind}:{self.expr(inline(value), want)}")
        self.most_arguments = max(self.most_arguments, len(args))
        self.steps.append(" ".join(["launch", str(self.kernels[launcher.kernel][0]), str(launcher.warps),
                                    str(launcher.shm), *grid, str(len(args)), *args]))


def _guard_checks(body: str) -> list:
    """eagerc_guard's terms (guard_source.py's form) as expressions over the guard's arrays."""
    names, checks = {}, []
    arrays = {"I": lambda i: (f"I:{i}", "i"), "F": lambda i: (f"F:{i}", "d")}
    for line in _statements(body):
        m = re.fullmatch(rf"const (int64_t|double) ({_NAME}) = ([IF])\[(\d+)\];", line)
        if m:
            names[m.group(2)] = arrays[m.group(3)](int(m.group(4)))
            continue
        if re.fullmatch(rf"\(void\){_NAME};", line) or line == "return 1;":
            continue
        m = re.fullmatch(r"if \(!(.+)\) return 0;", line)
        if m:
            checks.append(Compiler(names, arrays).compile(m.group(1)))
            continue
        raise Unsupported(f"guard statement {line!r}")
    return checks
