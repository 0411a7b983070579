"""What a code generator object is: everything that differs between the kinds of code
eagerc packages as artifacts (host C++, Triton kernels launched from C++).

The compiler (eagerc/compile/) is one pipeline for every kind: trace the call, have
Inductor generate its C++ wrapper, rewrite the wrapper, build it into a library. At each
step where the kinds differ it asks the target's code generator, an instance of a subclass
of :class:`Codegen`, and never the name of a device or of a kind of code. Each kind is a
room of its own, eagerc/codegen/cpp/ and eagerc/codegen/triton/: its generator.py holds
the subclass, the modules beside it what only that kind needs.

Importing this module (and its subclasses' modules) is cheap: ``import eagerc`` gives the
eagerc device its code generator without importing Inductor; the methods that compile
import what they need.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sys


@functools.lru_cache(maxsize=None)
def c_shim_ops(home: str) -> frozenset:
    """The ATen overloads ("aten::_fft_r2c", "aten::addmm.out") that Inductor's C shim for
    `home` ("cpu", "cuda") calls: what AOTInductor-generated code reaches of that device's
    kernel library (cuFFT, cuSOLVER, cuBLAS for CUDA). Read from the header torch installs,
    torch/include/torch/csrc/inductor/aoti_torch/generated/c_shim_<home>.h, whose functions
    are named aoti_torch_<home>_<op>[_<overload>]; empty where torch installed none."""
    import torch

    header = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc", "inductor",
                          "aoti_torch", "generated", f"c_shim_{home}.h")
    try:
        with open(header) as f:
            text = f.read()
    except OSError:
        return frozenset()
    shims = set(re.findall(rf"\baoti_torch_{re.escape(home)}_(\w+)\(", text))
    found = set()
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        if (f"{base}_{overload}" if overload else base) in shims:
            found.add(name)
    return frozenset(found)


class Codegen:
    """One kind of generated code, as eagerc builds and runs it.

    Attributes:
        name: "cpp", "triton" (logs, reports, errors).
        home: the Inductor device type its code runs on ("cpu", "cuda"). A served
            device's calls are traced on stand-ins of this device, its memory is this
            device's memory, and its kernels may run on zero-copy aliases there.
        build_recipe: how eagerc has Inductor build this code (part of every cache key:
            a change here is a new namespace).
        first_compile_is_costly: a process's first compile pays a large one-time setup
            (the coverage tool pays it before its first timed task).
        op_patch_rules: the rules :meth:`op_patches` applies, as data (part of every cache
            key: a kernel built under one rule is not a hit once the rule changes).
        stub_linked_libraries: the libtorch libraries ("torch_cpu") a wrapper of this code
            links, which eagerc links through empty stubs of the same soname
            (codegen/cpp/wrapper_build.py).
    """

    name = ""
    home = ""
    build_recipe = ""
    first_compile_is_costly = False
    op_patch_rules: tuple = ()
    stub_linked_libraries: tuple = ()
    # Inductor's C shim functions that call an ATen function of the home device take
    # their tensors by this prefix (``aoti_torch_cpu_convolution``) ...
    _home_shim_call: re.Pattern = re.compile(r"(?!)")
    # ... except these, which read their tensors only through data pointers, sizes and
    # strides (or act on the current device, not on tensors): they take a served
    # device's own tensors.
    _device_safe_shims: frozenset = frozenset()

    def __repr__(self) -> str:
        return f"<eagerc codegen {self.name}>"

    def __reduce__(self):
        # One object per kind: a pickled target (worker processes) gets the same object,
        # pickled by its name in its module (CPP in codegen/cpp/generator.py).
        module = sys.modules[type(self).__module__]
        return next(name for name, value in vars(module).items() if value is self)

    # -- whether and how it serves a device --------------------------------------------

    def claims(self, scheduling) -> bool:
        """Whether an Inductor scheduling (an instance, as Inductor builds it for a
        device, or its class) generates this kind of code."""
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """Why this machine cannot compile this code (None: it can)."""
        return None

    def refusal_for(self, device: str) -> str | None:
        """Why this code cannot serve `device`, a device whose Inductor backend generates
        it (None: it can; the device's memory is then this code's home memory)."""
        return None

    def arch(self) -> str:
        """What the generated code is specialized to, e.g. 'cpu-avx512' (in the cache
        namespace)."""
        raise NotImplementedError

    def compiler_settings(self) -> dict:
        """Named settings of this code generator that change its code (for the cache key)."""
        raise NotImplementedError

    def vendor_externs(self) -> frozenset:
        """The ATen overloads the home device's kernel library offers this code as externs
        through Inductor's C shims (:func:`c_shim_ops`): on a device with no native kernels
        and aliases off, a call that cannot be compiled and is one of these runs that kernel
        on the device's memory (counted as ``externs``) instead of the host round trip."""
        return c_shim_ops(self.home) if self.home else frozenset()

    def naming_calls(self, library: bytes) -> bytes | None:
        """What of `library`, where it is an artifact of this code that does not name the
        functions it calls in its own bytes (a launch plan appended to a shared launcher),
        names them; None where `library` names them itself or is not such an artifact."""
        return None

    def needs_home_aliases(self, code: str) -> bool:
        """Whether generated wrapper `code` calls an ATen function of the home device that
        must see tensors of the home device (extern convolution, the seeds of random
        ops): such an op of a served device runs on zero-copy aliases of its tensors."""
        return any(m.group(0) not in self._device_safe_shims for m in self._home_shim_call.finditer(code))

    # -- compiling ---------------------------------------------------------------------

    def decompositions(self) -> dict:
        """Decompositions used in place of Inductor's when tracing for this code."""
        return {}

    def has_pointwise(self, overrides) -> bool:
        """Whether Inductor implements a special function in this code: `overrides` is its
        entry of ``torch._inductor.codegen.common.pointwise_overrides_data``, which holds one
        implementation per kind of code in a field of that kind's name (eagerc's names are
        Inductor's). A function it lacks is traced with an accelerator decomposition where
        the target has no native kernels (compile/accelerator/decompositions.py's
        special_for)."""
        return getattr(overrides, self.name, None) is not None

    def inductor_patches(self, config) -> dict:
        """Inductor settings this code is generated under (`config`: torch._inductor.config)."""
        return {}

    def op_patches(self, op_qualname: str, args) -> dict:
        """Inductor settings a call of `op_qualname` with `args` compiles under, beyond
        :meth:`inductor_patches` (rules held in :attr:`op_patch_rules`)."""
        return {}

    def prepare(self, traced) -> None:
        """Make Inductor ready to generate this code for `traced` (each compile; cheap once
        done); raises CompileError for a graph this code cannot take."""

    def rewrite_generated(self, code: str) -> str:
        """The generated wrapper as the checks see it (before the target's own checks and
        its output allocation)."""
        return code

    def rewrite_for_entry(self, code: str, graph_inputs: set) -> str:
        """The wrapper after the checks, rewritten to be called by eagerc's kernel holder:
        this code's ordered rewrites (those every kind shares are in eagerc/compile/, its
        own in its room, eagerc/codegen/<kind>/)."""
        return code

    def build_path(self):
        """While active, Inductor's C++ builds of this code's wrappers run eagerc's way
        (a context manager; codegen/cpp/wrapper_build.py)."""
        return contextlib.nullcontext()

    def wrapper_headers(self) -> dict:
        """What eagerc's wrapper header (codegen/cpp/glue_prelude.py) adds to what every
        generated wrapper uses, for each device a wrapper of this code may compute on, named
        as the Inductor header the wrapper includes names it (``cpp_wrapper/<device>.h``:
        "cpu", "cuda"). A wrapper naming another device is built on Inductor's header."""
        return {}

    def lean_prelude(self):
        """A header tried before eagerc's wrapper header, or None: an object with
        ``fits(code, devices)``, ``without_file_loader(code)`` and ``text()``
        (codegen/triton/lean_gpu_prelude.py)."""
        return None

    def retry_after(self, error: Exception, traced, patches: dict) -> bool:
        """Whether the compile that raised `error` should run once more, after doing what
        it lacked (False: `error` is the compile's failure)."""
        return False
