"""The key of a compiled kernel: every component, named, in one table (:data:`COMPONENTS`).

A kernel (an op's, or a captured graph's) is stored in kernel_cache under two parts: the
**namespace**, shared by every kernel that one configuration of eagerc, torch, Inductor and
the compilers builds (kernel_cache.Namespace), and the **entry key**, which call it serves.
Each component of either is one entry of the table: its name, where its value comes from
and why the key holds it. Nothing else adds to a key:

- the per-op resolver, captured graphs (:func:`graph_signature`) and the compile service
  build their keys as :class:`CacheKey`;
- an op call's signature is built in C++ on every call (a hit never enters Python); its
  layout is defined once, in csrc/signature_layout.h, and read here through
  ``_C._signature_layout()`` (its version is the ``signature_layout`` component);
- what differs per code generator comes from the code generator object as named entries
  (``codegen.<name>``: its ``compiler_settings()``, ``build_recipe`` and ``op_patch_rules``).

A change that makes a kernel already keyed compute something else moves the component
that covers it: the versions below (``FORMAT_VERSION``, ``KNOWN_WRONG_VERSION``,
``ACCELERATOR_DECOMPOSITIONS_VERSION``), the C++ layout version, or the code generator's
entry. Kernels keyed before then fall in another namespace and are never served.

At DEBUG, the ``eagerc.key`` logger lists every component of a key by name (once for the
lookups of one miss), so "why did this miss?" has an answer::

    op aten::abs on cpu: namespace 3d18394ed9307338, entry 904bbd2ac2022d97
      format = 14
      signature_layout = 1
      torch = 2.13.0+cpu
      eagerc = 0.1.0
      arch = cpu-AVX512
      inductor_env = 4f53cda18c2baa0c
      inductor_config = 4f53cda18c2baa0c
      codegen.cxx = 3035783832772fdd
      codegen.threads = dynamic
      codegen.decompositions = 2
      codegen.build_recipe = 1a7fa2548e065765
      codegen.op_patch_rules = b233acec42a0ce32
      known_wrong = 2
      kind = op
      device = cpu
      name = aten::abs
      signature = 7f1b075511c1a2b3 (10 bytes; C++ layout 1, parts: tensor, absent_tensor, ...)

    >>> import eagerc.kernel_key as kernel_key, eagerc.targets as targets
    >>> key = kernel_key.CacheKey("op", targets.for_device("cpu"), "aten::abs", b"sig")
    >>> key.entry_key()
    b'op\\x00cpu\\x00aten::abs\\x00sig'
    >>> [c.name for c in kernel_key.COMPONENTS if c.part == "entry"]
    ['kind', 'device', 'name', 'signature']
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import threading
from typing import Any, Callable

import torch

log = logging.getLogger("eagerc.key")

# The artifact format: the entry points, the guard arrays, the metadata an entry carries,
# how a recorded refusal is answered, the layout of the entry key and of graph_signature.
# Also bumped when kernels already cached would now be wrong or slower and no other
# component covers the change. What each bump was for is in git history.
FORMAT_VERSION = 15

# The calls refused as known to compile wrongly (eagerc/compile/known_wrong.py): bumped
# when an entry is added or a predicate widens, so a kernel compiled before its call was
# refused is not served.
KNOWN_WRONG_VERSION = "7"

# The decompositions a device with no native kernels is traced with
# (eagerc/compile/accelerator/): bumped when one changes the code it produces.
ACCELERATOR_DECOMPOSITIONS_VERSION = "15"


@dataclasses.dataclass(frozen=True)
class CacheKey:
    """A call's description: everything its key is built from (by :data:`COMPONENTS`)."""

    kind: str          # "op" | "graph"
    target: Any        # eagerc.targets.Target
    name: str          # "aten::add.Tensor", "graph"
    signature: bytes   # the call's specialized part (C++ signature, or graph_signature)

    def components(self) -> dict:
        """Every component's value, by name (a code generator's entries as codegen.<name>);
        a component that does not apply to this key is left out."""
        return _values(self, COMPONENTS)

    def namespace_components(self) -> dict:
        """The namespace's components, each a short string (long values as digests)."""
        return {name: _short(value) for name, value in _values(self, _NAMESPACE_COMPONENTS).items()}

    def entry_key(self) -> bytes:
        """The entry's key in its namespace: the entry components, NUL-separated."""
        return b"\0".join(_bytes(component.value(self)) for component in COMPONENTS
                          if component.part == "entry")

    def namespace(self, parts: dict | None = None):
        """The kernel_cache namespace built from `parts` (default: namespace_components()):
        format, torch, eagerc and arch as its own fields, every other component in its
        compiler settings digest."""
        return self.namespace_and_digest(parts)[0]

    def namespace_and_digest(self, parts: dict | None = None) -> tuple:
        """(namespace(parts), its digest), built once per distinct `parts` in a process:
        every store lookup asks, and the components' values are all it depends on."""
        return _namespace_of(tuple((parts or self.namespace_components()).items()))


@dataclasses.dataclass(frozen=True)
class Component:
    """One named component of a key."""

    name: str
    part: str                           # "namespace" or "entry"
    source: str                         # where its value comes from
    why: str                            # why the key holds it
    value: Callable[[CacheKey], Any]    # its value for a key (None: does not apply; a dict:
                                        #   named entries of a code generator)


def graph_signature(gm, example_inputs, dynamic_dims) -> bytes:
    """A captured graph's signature component: the graph's code and each input's metadata
    (symbolic dims as 's'; strides and offsets of static inputs exactly, since the kernel
    assumes them). Its layout is covered by FORMAT_VERSION."""
    parts = [gm.code]
    for t, dims in zip(example_inputs, dynamic_dims):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"a compiled graph takes tensors, got {type(t).__name__}")
        sizes = ["s" if d in dims else str(n) for d, n in enumerate(t.shape)]
        strides = ["?"] * t.dim() if dims else [str(s) for s in t.stride()]
        parts.append(f"{t.dtype}|{t.device}|{','.join(sizes)}|{','.join(strides)}|"
                     f"{t.storage_offset() if not dims else '?'}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest().encode()


@functools.lru_cache(maxsize=None)
def signature_layout() -> tuple:
    """(version, ((name, bytes, why), ...)) of the C++ signature (csrc/signature_layout.h)."""
    import _eagerc as _C

    version, parts = _C._signature_layout()
    return version, tuple(parts)


# Every op decompositions.for_home_gaps can name is one of ATen's fused RNN cells or
# SyncBatchNorm's batch_norm_stats (compile/accelerator/rnn_cells.py, batch_norm_stats.py;
# tests/test_kernel_key.py checks it): other keys are
# answered by name, without importing the decompositions (Inductor, sympy), which a process
# loading its kernels from disk never needs.
HOME_GAP_PREFIX = ("aten::_thnn_fused_", "aten::batch_norm_stats")


def _traced_for_home_gap(key) -> bool:
    """Whether `key`'s op is one a target with native kernels traces with an accelerator
    decomposition, since neither its memory's home nor the CPU has a kernel for it."""
    if key.kind != "op" or not key.name.startswith(HOME_GAP_PREFIX):
        return False
    from eagerc.compile.accelerator.decompositions import for_home_gaps

    return key.kind == "op" and any(op.name() == key.name for op in for_home_gaps(key.target.home))


def _eagerc_version() -> str:
    from eagerc._version import __version__

    return __version__


def _inductor_environment(key: CacheKey):
    from eagerc.compile import settings

    return settings.inductor_environment()


def _inductor_overrides(key: CacheKey):
    from eagerc.compile import settings

    return settings.inductor_overrides()


def _codegen_entries(key: CacheKey) -> dict:
    codegen = key.target.codegen
    return {**codegen.compiler_settings(), "build_recipe": codegen.build_recipe,
            "op_patch_rules": codegen.op_patch_rules}


COMPONENTS: tuple = (
    Component("format", "namespace", "FORMAT_VERSION above",
              "the artifact's entry points, guard arrays and metadata, and the key's own layout",
              lambda key: FORMAT_VERSION),
    Component("signature_layout", "namespace",
              "csrc/signature_layout.h's kSignatureLayoutVersion (_C._signature_layout())",
              "the bytes of an op's signature: a key written under another layout is not misread",
              lambda key: signature_layout()[0]),
    Component("torch", "namespace", "torch.__version__",
              "Inductor, its code generators and the ATen ABI the kernel calls",
              lambda key: torch.__version__),
    Component("eagerc", "namespace", "eagerc.__version__",
              "eagerc's wrapper rewrites and runtime", lambda key: _eagerc_version()),
    Component("arch", "namespace", "the target's code generator's arch()",
              "generated code is specialized to the ISA or GPU architecture (cpu-avx512, sm_90)",
              lambda key: key.target.arch()),
    Component("inductor_env", "namespace",
              "TORCHINDUCTOR_* variables that change code (compile/settings.py)",
              "Inductor reads them while it generates code", _inductor_environment),
    Component("inductor_config", "namespace",
              "torch._inductor.config entries a program changed (compile/settings.py)",
              "a changed Inductor setting changes the code", _inductor_overrides),
    Component("codegen", "namespace",
              "the target's code generator object: compiler_settings(), build_recipe, op_patch_rules",
              "its compiler, how eagerc builds its code, and the Inductor settings it changes per op",
              _codegen_entries),
    Component("known_wrong", "namespace", "KNOWN_WRONG_VERSION above (compile/known_wrong.py)",
              "a call refused as known to compile wrongly must not be served a kernel built before",
              lambda key: KNOWN_WRONG_VERSION),
    Component("accelerator_decompositions", "namespace",
              "ACCELERATOR_DECOMPOSITIONS_VERSION above, for a target with no native kernels "
              "and for the ops no kernel of the memory's home serves (decompositions.for_home_gaps)",
              "such calls are traced with eagerc's accelerator decompositions",
              lambda key: ACCELERATOR_DECOMPOSITIONS_VERSION
              if not key.target.native_kernels or _traced_for_home_gap(key) else None),
    Component("kind", "entry", "the caller: 'op' (per-op resolver) or 'graph' (capture)",
              "an op's and a graph's kernels share a namespace", lambda key: key.kind),
    Component("device", "entry", "the target's device",
              "devices served by one code generator share a namespace", lambda key: key.target.device),
    Component("name", "entry", "the ATen overload ('aten::add.Tensor'), or 'graph'",
              "which computation the kernel is", lambda key: key.name),
    Component("signature", "entry",
              "an op call's C++ signature (csrc/signature.cpp), or graph_signature above",
              "what of the call is specialized into the kernel (DESIGN.md's signature rule)",
              lambda key: bytes(key.signature)),
)

_NAMESPACE_COMPONENTS = tuple(c for c in COMPONENTS if c.part == "namespace")
# The namespace components that are kernel_cache.Namespace fields of their own.
_NAMESPACE_FIELDS = ("format", "torch", "eagerc", "arch")


def _values(key: CacheKey, components) -> dict:
    """Each of `components`' values for `key`, by name (CacheKey.components)."""
    values = {}
    for component in components:
        value = component.value(key)
        if isinstance(value, dict):
            values.update({f"{component.name}.{k}": v for k, v in value.items()})
        elif value is not None:
            values[component.name] = value
    return values


@functools.lru_cache(maxsize=64)
def _namespace_of(parts: tuple) -> tuple:
    """(kernel_cache.Namespace, its digest) of the namespace components `parts`, as
    (name, short string) pairs."""
    import kernel_cache

    fields = dict(parts)
    compiler = hashlib.sha256(repr(sorted((k, v) for k, v in parts
                                          if k not in _NAMESPACE_FIELDS)).encode()).hexdigest()[:16]
    namespace = kernel_cache.Namespace(format_version=int(fields["format"]), torch_version=fields["torch"],
                                       eagerc_version=fields["eagerc"], target_arch=fields["arch"],
                                       compiler_settings=compiler)
    return namespace, namespace.digest()


def _short(value) -> str:
    """A namespace component as a short string: numbers and short names as they are,
    anything else as a digest."""
    text = str(value)
    if isinstance(value, (int, str)) and len(text) <= 64 and "\n" not in text:
        return text
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


_last_logged = threading.local()


def log_components(key: CacheKey, namespace_digest: str, parts: dict) -> None:
    """At DEBUG, every component of `key` by name; once for the lookups of one miss (the
    lock, get and put of one key in a row)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    entry = key.entry_key()
    if getattr(_last_logged, "key", None) == (namespace_digest, entry):
        return
    _last_logged.key = (namespace_digest, entry)
    lines = [f"{key.kind} {key.name} on {key.target.device}: namespace {namespace_digest}, "
             f"entry {hashlib.sha256(entry).hexdigest()[:16]}"]
    lines += [f"  {name} = {value}" for name, value in parts.items()]
    for component in COMPONENTS:
        if component.part == "entry":
            lines.append(f"  {component.name} = {_shown(key, component)}")
    log.debug("\n".join(lines))


def _shown(key: CacheKey, component: Component) -> str:
    value = component.value(key)
    if not isinstance(value, bytes):
        return str(value)
    if component.name == "signature":
        described = (f"C++ layout {signature_layout()[0]}, parts: "
                     f"{', '.join(name for name, _, _ in signature_layout()[1])}"
                     if key.kind == "op" else "graph_signature: the graph's code and inputs")
    else:
        described = "bytes"
    return f"{hashlib.sha256(value).hexdigest()[:16]} ({len(value)} bytes; {described})"
