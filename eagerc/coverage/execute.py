"""Run one (overload, dtype) task inside a worker: each sample on CPU eager (the
reference) and on the device, then one status from eagerc's counters, the artifacts the
compile/cache service loaded and the comparison (eagerc/coverage/classify.py).

Which artifacts an op's kernel came from is seen by wrapping the service's load step, ``cache._load``
(every kernel, compiled now or read from the cache, is loaded through it); the artifact's
dynamic symbols then name the ATen kernels it calls (``aoti_torch_cpu_mm_out``).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import time

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

import _eagerc as _C
from eagerc import _config, cache
from eagerc.aten_meta import overload_by_name
from eagerc.coverage import check, classify
from eagerc.coverage.enumerate import facts as op_facts
from eagerc.coverage.samples import NoSample, clone_tensor, schema_call
from eagerc.per_op.registration import disable, enable, stats


CPU_STAGE = "CPU eager reference"


class Device:
    """How coverage reaches one device: its dispatch key, its runtime set, and how CPU
    eager runs beside it (override devices are switched off for the reference)."""

    def __init__(self, name: str):
        from eagerc.targets import for_device

        target = for_device(name)  # raises TargetError where eagerc cannot serve it
        self.name = name
        # A device with kernels of its own (cpu, cuda) is served in override mode; a new
        # device (eagerc's own, a vendor's: examples/mydevice) has only its runtime, the
        # ops eagerc.enable leaves to every new device.
        self.override = not target.new_device
        self.key = target.dispatch_key
        self.home = target.home  # the Inductor device type its kernels run on (cpu, cuda)
        runtime = set(_config.RUNTIME_OPS)
        self.own_runtime = set() if self.override else set(_C._device_runtime_ops())
        self.runtime = runtime if self.override else self.own_runtime
        self.denied = runtime | self.own_runtime
        if self.override:  # checks that eagerc has a target for it
            enable(name)
        if self.override:
            disable(name)

    def warm_up(self) -> None:
        """Pay the process's one-time cost of a first GPU compile (Inductor's and Triton's
        imports, the C++ wrapper's precompiled header: ~70 s on the GPU machine) before
        the first task, whose timeout is meant for that op alone. Host code generation
        has no such cost worth paying ahead."""
        from eagerc.targets import for_device

        if not for_device(self.name).codegen.first_compile_is_costly:
            return
        with self.served():
            torch.neg(torch.ones(1, device=self.name))

    @contextlib.contextmanager
    def native(self):
        """CPU eager as the reference (eagerc off on an override device)."""
        yield

    @contextlib.contextmanager
    def served(self):
        if self.override:
            enable(self.name)
        try:
            yield
        finally:
            if self.override:
                disable(self.name)

    def to_device(self, value):
        """Tensors moved to the device; factory arguments (device=cpu) pointed at it."""
        return value if self.name == "cpu" else _moved(value, self.name)

    def misplaced(self, outputs) -> str:
        """What is wrong with where the device's outputs live ("" when nothing): each on
        the device with its index, over a storage of the same device (a tensor on
        "eagerc" without an index breaks later out= calls and set_)."""
        want = torch.device(self.name, 0) if self.name != "cpu" else torch.device("cpu")
        for i, t in enumerate(tree_flatten(outputs)[0]):
            if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
                continue
            storage = t.untyped_storage().device
            if t.device != want or storage != want:
                return f"output {i} on {t.device} (storage on {storage}), expected {want}"
        return ""

    def composite_fallback(self, name: str) -> bool:
        """On a new device (no kernels of its own), a refused op falls back to its
        CompositeExplicitAutograd kernel, which calls ops the device serves."""
        return not self.override and self.name != "cpu" and torch._C._dispatch_has_kernel_for_dispatch_key(
            name, "CompositeExplicitAutograd")

    def why_not_served(self, name: str) -> str:
        f = op_facts(name)
        if name in self.denied:
            return "a runtime op (eagerc never compiles it)" + (
                "; the device has no kernel for it" if name not in self.own_runtime and not self.override else "")
        if f.view:
            return "a view (returns an alias of an input)"
        if "inplace_view" in f.tags:
            return "an in-place view op"
        if {"dynamic_output_shape", "data_dependent_output"} & set(f.tags):
            return "its output shape or value depends on the data (" + \
                ", ".join(t for t in f.tags if t in ("dynamic_output_shape", "data_dependent_output")) + ")"
        if f.random and self.override:
            return "a random op (override mode leaves random ops to the device)"
        if not f.has_cpu_kernel:
            return "no CPU kernel to compile from"
        skipped = dict(_C._enable_ops("PrivateUse3", [name], host_aliases=False, new_device=True)[1])
        if name in skipped:
            return skipped[name]
        return "not registered by eagerc"


_loads: list = []                                   # (op name, artifact path) of this call
_seen = collections.defaultdict(set)                # (op name, dtype) -> artifact paths


def install_load_recorder() -> None:
    """Record (op, artifact path) of every kernel the compile/cache service loads: compiled
    now (put) or read from the cache (get), each is loaded through cache._load."""
    original = cache._load
    if getattr(original, "_coverage", False):
        return

    def recording_load(entry):
        _loads.append((entry.metadata.get("op"), entry.artifact_path))
        return original(entry)

    recording_load._coverage = True
    cache._load = recording_load


def _clone(value):
    return tree_map(lambda t: clone_tensor(t) if isinstance(t, torch.Tensor) else t, value)


def _to_cpu(value):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, value)


def _written(op, args, kwargs) -> list:
    """The arguments the schema marks as written (in-place self, out=)."""
    out = []
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            out.append(kwargs.get(arg.name) if arg.kwarg_only else (args[i] if i < len(args) else None))
    return out


def _undefined_outputs(op, call, expected) -> set:
    """Outputs whose values CPU eager itself leaves undefined (``_ctc_loss``'s log_alpha,
    scratch buffers): a second CPU run, on memory just filled with a pattern, disagrees on
    them. Only their shape and dtype are compared (indices into the flattened outputs)."""
    flat = tree_flatten(expected)[0]
    numel = sum(t.numel() for t in flat if isinstance(t, torch.Tensor))
    pattern = torch.full((max(numel, 1) * 2,), 7.0)  # freed at once: the next allocations
    del pattern                                       # of that size reuse its memory
    args, kwargs = _clone(call.args), _clone(call.kwargs)
    try:
        again = tree_flatten((op(*args, **kwargs), _written(op, args, kwargs)))[0]
    except Exception:  # noqa: BLE001
        return set()
    if len(again) != len(flat):
        return set()
    return {i for i, (a, e) in enumerate(zip(again, flat))
            if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and check.values(a, e) is not None}


def _moved(value, device: str):
    """`value` with its tensors copied to `device` and factory arguments (device=cpu)
    pointed at it."""
    def move(v):
        if isinstance(v, torch.Tensor):
            return clone_tensor(v, device)
        if isinstance(v, torch.device) and v.type == "cpu":
            return torch.device(device)
        return v

    return tree_map(move, value)


def _home_conventions(op, call, expected, dev):
    """`expected` with the outputs whose shape CPU eager and the device's memory home's
    eager (CUDA on GPU memory) choose differently taken from the home's eager: buffers
    each backend shapes its own way for its backward (native_batch_norm's saved mean and
    invstd in eval, log_sigmoid_forward's buffer, embedding_bag's offset2bag). The device
    keeps its home's convention; every other output is still held to CPU eager."""
    if dev.home == "cpu":
        return expected

    args, kwargs = _moved(call.args, dev.home), _moved(call.kwargs, dev.home)
    try:
        home = (op(*args, **kwargs), _written(op, args, kwargs))
    except Exception:  # noqa: BLE001 - the home rejects it: CPU eager decides alone
        return expected
    flat, spec = tree_flatten(expected)
    flat_home = tree_flatten(home)[0]
    if len(flat_home) != len(flat):
        return expected
    for i, (e, h) in enumerate(zip(flat, flat_home)):
        if isinstance(e, torch.Tensor) and isinstance(h, torch.Tensor) and e.shape != h.shape:
            flat[i] = h.cpu()
    return tree_unflatten(flat, spec)


@dataclasses.dataclass
class Outcome:
    status: str = ""
    detail: str = ""
    skipped: str = ""           # CPU eager rejected the sample
    worst: dict = None
    externs: list = dataclasses.field(default_factory=list)
    via: list = dataclasses.field(default_factory=list)


def _served_outcome(name, dtype, facts, dev, delta) -> Outcome:
    own = delta.get(f"{name}@{dev.key}")
    if own is not None:
        paths = [p for n, p in _loads if n == name]
        _seen[(name, dtype)].update(paths)
        ext = classify.externs(paths or _seen[(name, dtype)])
        status, detail = classify.served_status(own, ext, composite=dev.composite_fallback(name))
        return Outcome(status, detail, externs=ext)
    if name in dev.runtime:
        return Outcome("runtime", "the device's hand-written runtime")
    others = {k.rsplit("@", 1)[0]: v for k, v in delta.items() if k.endswith("@" + dev.key)}
    if others:
        subs = []
        for other, counters in sorted(others.items()):
            paths = [p for n, p in _loads if n == other]
            _seen[(other, dtype)].update(paths)
            subs.append((*classify.served_status(counters, classify.externs(paths or _seen[(other, dtype)]),
                                                 composite=dev.composite_fallback(other)), other))
        status = classify.worst([s for s, _, _ in subs])
        detail = "; ".join(f"{o}: {s}" + (f" ({d})" if d else "") for s, d, o in subs if s == status)
        ext = sorted({e for s, d, o in subs if s == "extern" for e in d.split(", ")})
        return Outcome(status, f"via {detail}"[:400], externs=ext, via=sorted(others))
    if dev.override:
        return Outcome("not_served", dev.why_not_served(name))
    return Outcome("runtime", "reached only the device's runtime (views, copies, allocation)")


def _stage(call, what: str) -> None:
    """The worker's log says what runs, so a crash can be told apart (runner._crash_record)."""
    print(f"  {call.source}: {what}", file=sys.stderr, flush=True)


def run_call(op, name, dtype, facts, call, dev) -> Outcome:
    _stage(call, CPU_STAGE)
    with dev.native():
        try:
            ref_args, ref_kwargs = _clone(call.args), _clone(call.kwargs)
            expected = op(*ref_args, **ref_kwargs)
            expected = (expected, _written(op, ref_args, ref_kwargs))
        except Exception as e:  # noqa: BLE001 - CPU eager rejects it: not a sample
            return Outcome(skipped=classify.first_line(e))
        undefined = set() if facts.random or facts.undefined_values else _undefined_outputs(op, call, expected)
        if not (facts.random or facts.undefined_values):
            expected = _home_conventions(op, call, expected, dev)
        args, kwargs = dev.to_device(_clone(call.args)), dev.to_device(_clone(call.kwargs))
    _stage(call, "device")
    _loads.clear()
    before = stats()["ops"]
    raised = None
    try:
        with dev.served():
            actual = op(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the device's failure is the result
        raised = e
    delta = classify.stats_delta(before, stats()["ops"])
    if raised is not None:
        own = delta.get(f"{name}@{dev.key}", {})
        message = str(raised)
        if (own.get("fallbacks") or own.get("fallback_reasons")) and "could not be compiled" in message:
            return Outcome(*classify.served_status(own, []))  # the new device's refusal
        if isinstance(raised, NotImplementedError) and ("Could not run" in message or "no kernel" in message):
            why = dev.why_not_served(name)
            return Outcome("unsupported_arg" if why.startswith("unsupported") else "no_kernel", why)
        return Outcome("error", classify.first_line(raised))
    outcome = _served_outcome(name, dtype, facts, dev, delta)
    misplaced = dev.misplaced(actual)
    if misplaced:
        return Outcome("mismatch", f"device: {misplaced} [{call.describe()}]", externs=outcome.externs)
    with dev.native():
        actual = (_to_cpu(actual), _to_cpu(_written(op, args, kwargs)))
        how = check.metadata if facts.undefined_values else check.statistics if facts.random else check.values
        problem = how(*check.without(undefined, actual, expected))
    if problem is not None:
        kind = "statistics" if facts.random else "metadata" if facts.undefined_values else "values"
        served = f"{outcome.status}" + (f": {outcome.detail}" if outcome.detail else "")
        return Outcome("mismatch", f"{kind}: {problem.get('message', '')} [{call.describe()}; served as {served}]",
                       worst={k: v for k, v in problem.items() if k != "message"}, externs=outcome.externs,
                       via=outcome.via)
    if facts.random and outcome.status in ("pass", "extern", "aliased"):
        outcome.detail = f"{outcome.status}" + (f": {outcome.detail}" if outcome.detail else "")
        outcome.status = "random"
    return outcome


def run_task(task: dict, dev: Device) -> dict:
    """The result record of one (overload, dtype) task."""
    start = time.perf_counter()
    name, dtype_name = task["op"], task["dtype"]
    dtype = getattr(torch, dtype_name)
    op = overload_by_name(name)
    facts = op_facts(name)
    calls = list(task.get("calls") or [])
    outcomes, skipped = [], []
    tried_schema = not calls
    if not calls:
        try:
            calls = [schema_call(name, dtype)]
        except NoSample as e:
            skipped.append(f"schema: {e}")
    for call in calls:
        outcome = run_call(op, name, dtype, facts, call, dev)
        (skipped.append(f"{call.source}: {outcome.skipped}") if outcome.skipped else outcomes.append((call, outcome)))
    if not outcomes and not tried_schema:
        try:
            call = schema_call(name, dtype)
            outcome = run_call(op, name, dtype, facts, call, dev)
            (skipped.append(f"schema: {outcome.skipped}") if outcome.skipped else outcomes.append((call, outcome)))
        except NoSample as e:
            skipped.append(f"schema: {e}")
    record = {"op": name, "dtype": dtype_name, "samples_run": len(outcomes), "samples_skipped": len(skipped)}
    if not outcomes:
        why = skipped[-1] if skipped else "no sample"
        record.update(status="no_sample", detail=f"CPU eager rejected every sample; last: {why}"[:400]
                      if "schema: argument" not in why and "schema: out=" not in why else why)
    else:
        status = classify.worst([o.status for _, o in outcomes])
        call, chosen = next((c, o) for c, o in outcomes if o.status == status)
        record.update(status=status, detail=chosen.detail, sample=call.describe(),
                      source=call.source.split("(")[0])
        if chosen.worst:
            record["worst"] = chosen.worst
        externs = sorted({e for _, o in outcomes for e in o.externs})
        if externs:
            record["externs"] = externs
        if chosen.via:
            record["via"] = chosen.via
    record["seconds"] = round(time.perf_counter() - start, 3)
    return record
