"""enable / disable / enabled / stats: the per-op compiled-kernel mode."""
from __future__ import annotations

import contextlib
from typing import Iterable, Optional

import _eagerc as _C
from eagerc import _config, _stats, targets

_resolver_installed = False
_resolver = None  # eagerc.per_op.resolver, once the first miss imported it

# The CPU's fused attention, which the CPU's scaled_dot_product_attention choice names.
_FLASH_FOR_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"


def _normalize(op: str) -> str:
    op = op.strip()
    return op if op.startswith("aten::") else "aten::" + op


def _resolve(request):
    """The first miss loads the resolver (and with it the cache service), not `import eagerc`."""
    global _resolver
    if _resolver is None:
        from eagerc.per_op import resolver

        _resolver = resolver  # kept: an import statement per miss cost 1.4 µs
    return _resolver.resolve(request)


def _install_resolver() -> None:
    global _resolver_installed
    if not _resolver_installed:
        _C._set_resolver(_resolve)
        _C._set_cpu_fallback(_config.cpu_fallback_enabled())
        _C._set_alias_fallback(_config.alias_fallback_enabled())
        _resolver_installed = True


def enable(device: str = "cpu", ops: Optional[Iterable[str]] = None,
           compile: Optional[str] = None) -> list:
    """Serve `device`'s ATen ops with compiled kernels; returns the ops registered.

    ``ops=None`` means every op eagerc can serve: views, random ops and the device
    runtime (allocation, copies) stay native. Name ops ("aten::add.Tensor",
    "aten::abs") to serve only those; a random op named here is compiled too.
    A device eagerc has no target for (eagerc/targets.py) raises TargetError, a
    ValueError naming the known targets and how to add one. ``compile``: "background"
    (the default, ``$EAGERC_COMPILE``) answers a miss at once with a kernel that exists
    (the device's own; its memory home's on aliases; else the host round trip) while the
    compile service compiles its kernel in other processes (eagerc/per_op/background.py;
    a random op that compiles does so at its first call, so its numbers follow the seed;
    the eagerc device runs them with ATen's kernels); "now"
    compiles before answering, in this process.

        >>> import torch, eagerc
        >>> ops = eagerc.enable("cpu", ops=["aten::abs"])
        >>> torch.abs(torch.tensor([-1.0])).item()
        1.0
        >>> eagerc.disable("cpu")
    """
    target = targets.for_device(device)
    from eagerc.per_op import background

    background.set_mode(target.device, compile)
    _install_resolver()
    targets.serve(target)
    key, new_device = target.dispatch_key, target.new_device
    serving = {"host_aliases": target.host_aliases, "new_device": new_device}
    if target.host_aliases:
        # The holders (and the device's runtime ops) alias its tensors onto this device.
        _C._set_memory_home(target.device, target.home)
    if ops is None:
        deny = list(_config.RUNTIME_OPS) + (list(_C._device_runtime_ops()) if new_device else [])
        if new_device and target.host_aliases:
            deny += _config.EAGER_OUT_FORMS
        names = _C._servable_ops(key, new_device, _random_ops(target), deny)
    else:
        names = [_normalize(o) for o in ops]
        unknown_runtime = [n for n in names if n in _config.RUNTIME_OPS]
        if unknown_runtime:
            raise ValueError(
                f"eagerc cannot compile {unknown_runtime}: they are the device runtime "
                "(allocation, copies, metadata), which compiled kernels themselves call. "
                "Leave them out of ops=."
            )
    registered, skipped = _C._enable_ops(key, names, **serving)
    _C._specialize_scalars(list(_config.SPECIALIZE_SCALARS))
    if new_device and target.host_aliases and ops is None:
        # What no compiled kernel can serve (output shapes that depend on values, a bool
        # or several-tensor result, sparse tensors) runs its memory home's ATen kernel on
        # zero-copy aliases (counted as "aliased"); the device runtime stays its own.
        taken = set(registered)
        rest = [n for n in _C._aliasable_ops(key, list(_C._device_runtime_ops())) if n not in taken]
        aliased, _ = _C._enable_ops(key, rest, **serving, run_on_aliases=True)
        registered += aliased
    if new_device:
        # With aliases off, what its code generator's vendor library offers (Inductor's C
        # shims) is the rung before the host round trip (docs/vendor.md).
        _C._set_vendor_externs(key, sorted(target.codegen.vendor_externs()))
    if new_device and target.host_aliases and target.home == "cpu" and _FLASH_FOR_CPU in registered:
        # Host memory: scaled_dot_product_attention takes the CPU's choice, as on the eagerc
        # device, unless the device's runtime registered a choice of its own. Without one
        # ATen takes the math path (two scalings, two batched matmuls and a softmax: each a
        # miss of its own on a first run, and a kernel of its own), where the CPU's fused
        # attention is one op, ATen's CPU kernel in the interim and in the compiled wrapper.
        _C._serve_attention_choice()
    if ops is not None and skipped:
        raise ValueError(
            "eagerc cannot serve: " + "; ".join(f"{n} ({why})" for n, why in skipped)
            + ". Check the names with torch._C._dispatch_get_all_op_names()."
        )
    return registered


def _random_ops(target) -> str:
    """Which random ops `enable` compiles (csrc/registration.h's RandomOps): none in
    override mode; on a new device on host memory that can lean on the CPU's kernels, only
    those that draw inside an ATen kernel the wrapper calls (attention's dropout), the
    others run the CPU's kernel on aliases (eager's numbers and speed: Inductor's C++ draws
    element by element, randn 15x the CPU's); else all of them (on GPU memory Inductor's
    Triton draws in parallel from cuda:N's seed, as tests/test_gpu_device*.py check)."""
    if not target.new_device:
        return "native"
    return "in_home_externs" if target.native_kernels and target.home == "cpu" else "compiled"


def disable(device: str = "cpu") -> None:
    """Remove eagerc's kernels from `device`; its native kernels serve again.

        >>> import eagerc
        >>> _ = eagerc.enable("cpu", ops=["aten::abs"]); eagerc.disable("cpu")
    """
    _C._disable_key(targets.for_device(device).dispatch_key)


@contextlib.contextmanager
def enabled(device: str = "cpu", ops: Optional[Iterable[str]] = None):
    """Context manager form of :func:`enable` / :func:`disable`.

        >>> import torch, eagerc
        >>> with eagerc.enabled("cpu", ops=["aten::add.Tensor"]):
        ...     y = torch.ones(3) + torch.ones(3)
    """
    was_enabled = _C._is_enabled(targets.for_device(device).dispatch_key)
    enable(device, ops)
    try:
        yield
    finally:
        if not was_enabled:
            disable(device)


def stats() -> dict:
    """Totals and per-op counters: hits, misses, compiles, disk_loads, fallbacks,
    compile_seconds, interim (calls answered by an existing kernel while the compile service
    compiled theirs), background_compiles (kernels the compile service compiled, loaded
    here), and on a device with no native kernels and aliases off, the calls no compiled
    kernel served: externs (the vendor library's kernel the code generator lists) and
    host_round_trips (copied to CPU and back; docs/vendor.md) (and per op: kernels,
    fallback_reasons, and on_home_aliases: on a device whose memory has a home, the op's
    kernels run on zero-copy aliases of the home device, CPU or CUDA, because they call its
    ATen functions).

        >>> import eagerc
        >>> sorted(k for k in eagerc.stats() if k != "ops")
        ['aliased', 'background_compiles', 'compile_seconds', 'compiles', 'disk_loads', 'externs', 'fallbacks', 'hits', 'host_round_trips', 'interim', 'misses']
    """
    per_op = {}
    py_side = _stats.snapshot()
    for name, counters in _C._op_stats().items():
        entry = {"hits": counters["hits"], "misses": counters["misses"], "fallbacks": counters["fallbacks"],
                 "aliased": counters["aliased"], "interim": counters["interim"],
                 "externs": counters["externs"], "host_round_trips": counters["host_round_trips"],
                 "kernels": counters["kernels"], "fallback_reasons": dict(counters["fallback_reasons"]),
                 "on_home_aliases": counters["on_home_aliases"],
                 "compiles": 0, "disk_loads": 0, "compile_seconds": 0.0, "background_compiles": 0}
        entry.update(py_side.get(name, {}))
        ready = entry.pop("ready_on_miss", 0)  # took a kernel compiled in the background: a hit
        entry["hits"], entry["misses"] = entry["hits"] + ready, entry["misses"] - ready
        per_op[name] = entry
    totals = {k: sum(v[k] for v in per_op.values())
              for k in ("hits", "misses", "compiles", "disk_loads", "fallbacks", "aliased", "interim",
                        "externs", "host_round_trips", "background_compiles", "compile_seconds")}
    active = {k: v for k, v in per_op.items()
              if v["hits"] or v["misses"] or v["fallbacks"] or v["aliased"] or v["interim"]
              or v["externs"] or v["host_round_trips"]}
    return _stats.Stats({**totals, "ops": active})


def reset_stats() -> None:
    """Zero every counter (kernels stay loaded).

        >>> import eagerc; eagerc.reset_stats(); eagerc.stats()["hits"]
        0
    """
    _C._reset_op_stats()
    _stats.reset()
