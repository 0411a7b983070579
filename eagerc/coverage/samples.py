"""Sample calls for each overload, as the overload itself receives them.

Two sources:

- OpInfo (torch's op_db): each OpInfo's samples run on CPU under a TorchDispatchMode that
  records every aten overload they reach, with that overload's own arguments (cloned
  before the call, so in-place ops replay from the same inputs). With ``grad`` the
  backward runs through autograd under the same mode, so backward overloads
  (``threshold_backward``, ``mm`` on transposes, ...) get samples too. This also maps each
  OpInfo entry to the overloads it reaches (the per-OpInfo summary).
- The schema, for an overload no OpInfo reaches (:func:`schema_call`): small tensors of
  the dtype for Tensor arguments, defaults (or simple values) for the rest.

A :class:`Call` holds CPU tensors and plain values, so it pickles to a worker.
"""
from __future__ import annotations

import dataclasses
import warnings
import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from eagerc.aten_meta import overload_by_name, qualified_name


@dataclasses.dataclass
class Call:
    source: str      # "opinfo:add[2]" (OpInfo name, sample index) or "schema"
    args: tuple
    kwargs: dict

    def describe(self) -> str:
        def d(v):
            if isinstance(v, torch.Tensor):
                return f"{str(v.dtype)[6:]}{list(v.shape)}" + ("" if v.is_contiguous() else "nc")
            if isinstance(v, (list, tuple)):
                return "[" + ",".join(d(x) for x in v) + "]"
            return repr(v)
        parts = [d(a) for a in self.args] + [f"{k}={d(v)}" for k, v in self.kwargs.items()]
        return f"{self.source}({', '.join(parts)})"[:200]


@dataclasses.dataclass
class Plan:
    """The calls recorded for one dtype: overload -> calls, and OpInfo entry -> overloads."""

    dtype: str
    grad: bool
    calls: dict = dataclasses.field(default_factory=dict)
    opinfo_ops: dict = dataclasses.field(default_factory=dict)   # "add" -> [overloads]
    opinfo_errors: dict = dataclasses.field(default_factory=dict)  # "name" -> why no sample
    wanted: object = None   # the op selection it was recorded for (None: every op)
    limit: int = 0          # calls kept per overload


def whole_storage(t: torch.Tensor) -> torch.Tensor:
    """`t`'s storage as one flat tensor of t's dtype."""
    storage = t.untyped_storage()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        storage, 0, (storage.nbytes() // t.element_size(),), (1,))


def clone_tensor(t: torch.Tensor, device=None) -> torch.Tensor:
    """A copy of `t` with its own storage and the same size, stride and storage offset
    (a view of a larger base stays one: the offset decides alignment, and views of
    partial storages are what some device bugs need), on `device` if given."""
    t = t.detach().resolve_conj().resolve_neg()
    base = whole_storage(t)
    base = base.clone() if device is None else base.to(device)
    return base.as_strided(t.size(), t.stride(), t.storage_offset())


def _clone(value):
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or type(value) is not torch.Tensor:
            raise TypeError(f"{value.layout} / {type(value).__name__} tensor")
        return clone_tensor(value)
    return value


class _Recorder(TorchDispatchMode):
    """Records which overloads run, and the arguments of those in `wanted` (up to `limit`
    distinct-looking calls each)."""

    def __init__(self, plan: Plan, source: str, wanted, limit: int):
        super().__init__()
        self.plan, self.source, self.wanted, self.limit = plan, source, wanted, limit
        self.reached: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "aten":
            name = qualified_name(func)
            self.reached.add(name)
            have = self.plan.calls.setdefault(name, []) if self._wants(name) else None
            if have is not None and len(have) < self.limit:
                try:
                    call = Call(self.source, tree_map(_clone, tuple(args)), tree_map(_clone, dict(kwargs)))
                except TypeError:
                    call = None  # sparse, nested or subclass tensors: not replayable as is
                if call is not None and call.describe().split("(", 1)[1] not in \
                        {c.describe().split("(", 1)[1] for c in have}:
                    have.append(call)
        return func(*args, **kwargs)

    def _wants(self, name: str) -> bool:
        return self.wanted is None or name in self.wanted


def _related(opinfo, wanted) -> bool:
    """With an op selection, only OpInfos named like a selected op's base name run (a full
    run takes every OpInfo): the same name, or one the base name extends with "_..."
    (OpInfo ``histogramdd`` for ``aten::_histogramdd_from_bin_tensors``, ``softmax`` for
    ``aten::_softmax_backward_data``); leading and trailing underscores aside."""
    if wanted is None:
        return True
    names = {opinfo.name.split(".")[-1], opinfo.name.replace(".", "_"), getattr(opinfo, "aten_name", "") or ""}
    names = {n.strip("_") for n in names if n.strip("_")}
    bases = {w.split("::", 1)[-1].split(".", 1)[0].strip("_") for w in wanted}
    return any(b == n or b.startswith(n + "_") for b in bases for n in names)


def _differentiable_sum(outputs):
    leaves = [t for t in tree_flatten(outputs)[0]
              if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    return sum(t.sum() for t in leaves) if leaves else None


def record_opinfo(dtype: torch.dtype, grad: bool, wanted=None, limit: int = 4,
                  samples_per_opinfo: int = 8, progress=None) -> Plan:
    """Run op_db's samples for `dtype` on CPU and record the overloads they reach. With an op
    selection (`wanted`), only the OpInfos named like a selected op run (:func:`_related`);
    a selected op none of them reaches gets schema samples, as an op without an OpInfo does."""
    from torch.testing._internal.common_methods_invocations import op_db

    plan = Plan(str(dtype).replace("torch.", ""), grad, limit=limit)
    named = [o for o in op_db if _related(o, wanted)]
    _record_entries(plan, named, dtype, grad, wanted, limit, samples_per_opinfo, progress)
    plan.calls = {k: v for k, v in plan.calls.items() if v}
    return plan


def _record_entries(plan: Plan, entries, dtype, grad, wanted, limit, samples_per_opinfo, progress) -> None:
    """Record `entries`' samples into `plan`, and per entry the overloads it reached."""
    for opinfo in (progress(entries) if progress else entries):
        entry = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
        backward = grad and opinfo.supports_autograd and dtype in opinfo.supported_backward_dtypes("cpu")
        if dtype not in opinfo.supported_dtypes("cpu"):
            plan.opinfo_errors[entry] = f"OpInfo does not support {dtype} on CPU"
            continue
        reached: set = set()
        try:
            torch.manual_seed(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                samples = opinfo.sample_inputs("cpu", dtype, requires_grad=backward)
                for i, sample in enumerate(samples):
                    if i >= samples_per_opinfo:
                        break
                    recorder = _Recorder(plan, f"opinfo:{entry}[{i}]", wanted, limit)
                    try:
                        with recorder:
                            out = opinfo.op(sample.input, *sample.args, **sample.kwargs)
                            loss = _differentiable_sum(out) if backward else None
                            if loss is not None:
                                loss.backward()
                    except Exception:  # noqa: BLE001 - a sample CPU eager rejects is no sample
                        pass
                    reached |= recorder.reached
        except Exception as e:  # noqa: BLE001
            plan.opinfo_errors[entry] = f"sample_inputs failed: {type(e).__name__}: {str(e)[:100]}"
        if reached:
            plan.opinfo_ops[entry] = sorted(reached)


# ------------------------------------------------------------------ schema samples

class NoSample(Exception):
    """The schema asks for an argument no simple value can stand for."""


_INDEX_NAMES = ("index", "indices", "target", "offsets", "lengths", "batch_sizes", "counts")


def _tensor(dtype: torch.dtype, name: str, shape=(4, 4)) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))  # x1 and x2 differ
    if any(k in name for k in _INDEX_NAMES):
        return torch.zeros(shape, dtype=torch.int64)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return torch.randint(0, 4, shape, generator=g, dtype=dtype)


def _value(arg, dtype: torch.dtype):
    t = arg.type
    kind = str(t)
    name = arg.name
    writes = arg.alias_info is not None and arg.alias_info.is_write
    if arg.kwarg_only and writes and "Tensor" in kind:
        if "[]" in kind:
            raise NoSample(f"out= list argument '{name}'")
        return torch.empty(0, dtype=dtype)  # out=: resized by the op
    if arg.has_default_value() and "Device" not in kind:
        return arg.default_value
    if kind.startswith("Tensor?[]") or kind.startswith("Optional[Tensor][]") or kind == "List[Optional[Tensor]]":
        return [torch.zeros(4, dtype=torch.int64)]
    if "Tensor" in kind and ("[]" in kind or kind.startswith("List")):
        return [_tensor(dtype, name), _tensor(dtype, name + "1")]
    if "Tensor" in kind:
        return _tensor(dtype, name)
    base = kind.rstrip("?")
    if "Device" in kind:
        return torch.device("cpu")  # pointed at the device under test with the tensors
    if kind.endswith("?") or kind.startswith("Optional"):
        return None
    # ScalarType, Layout and MemoryFormat arguments are ints in the JIT type system.
    if base == "int" and "dtype" in name:
        return dtype
    if base == "int" and name == "layout":
        return torch.strided
    if base == "int" and name == "memory_format":
        return torch.contiguous_format
    if base in ("int", "SymInt"):
        return 0 if "dim" in name else 2
    if base.startswith(("int[", "SymInt[", "List[int]", "List[SymInt]")):
        return [0] if "dim" in name else [2, 2]
    if base == "float":
        return 0.5
    if base.startswith(("float[", "List[float]")):
        return [0.5, 0.5]
    if base == "bool":
        return False
    if base.startswith(("bool[", "List[bool]")):
        return [False, False]
    if base in ("Scalar", "number"):
        return 2
    if base.startswith(("Scalar[", "List[number]", "List[Scalar]")):
        return [2, 2]
    if base == "ScalarType":
        return dtype
    raise NoSample(f"argument '{name}' of type {kind}")


def schema_call(name: str, dtype: torch.dtype) -> Call:
    """A call of `name` built from its schema (raises NoSample with the reason)."""
    schema = overload_by_name(name)._schema
    args, kwargs = [], {}
    for arg in schema.arguments:
        value = _value(arg, dtype)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return Call("schema", tuple(args), kwargs)
