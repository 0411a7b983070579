"""The miss path, called from C++ (csrc/resolver_bridge.cpp) with the GIL held.

L2 (kernel_cache on disk, plus a remote tier when configured) -> otherwise compile ->
store in every tier -> hand the artifact's path back to C++, which loads it into L1.
Concurrent misses of one key compile once: the second caller waits on the key's lock
and then finds the first caller's variant.
"""
from __future__ import annotations

import collections
import hashlib
import logging
import os
import threading

import torch

from eagerc import _config, _stats

log = logging.getLogger("eagerc")

_store = None
_store_lock = threading.Lock()
_key_locks: dict = collections.defaultdict(threading.Lock)


def _namespace():
    # Cheap on purpose: a process whose kernels are all on disk never imports Inductor.
    import kernel_cache

    import eagerc

    isa = torch.backends.cpu.get_cpu_capability()
    settings = hashlib.sha256(repr((os.environ.get("CXX", "g++"),)).encode()).hexdigest()[:16]
    return kernel_cache.Namespace(
        format_version=_config.FORMAT_VERSION,
        torch_version=torch.__version__,
        eagerc_version=eagerc.__version__,
        target_arch=f"cpu-{isa}",
        compiler_settings=settings,
    )


def store():
    """The kernel store for this process (opened on the first miss, not at import)."""
    global _store
    with _store_lock:
        if _store is None:
            import kernel_cache

            _store = kernel_cache.open_store(_namespace())
        return _store


def reset_store() -> None:
    """Forget the open store (tests point EAGERC_CACHE_DIR elsewhere)."""
    global _store
    with _store_lock:
        _store = None


def _overload(op_name: str):
    name, _, overload = op_name.split("::", 1)[-1].partition(".")
    packet = getattr(torch.ops.aten, name)
    return getattr(packet, overload or "default")


def resolve(op_name: str, dispatch_key: str, key: bytes, args: tuple, specialize: bool, known: list):
    """Returns ("kernel", variant_id, path, num_outputs) | ("specialize",) | ("aliases",) |
    ("fallback", reason)."""
    stat_key = f"{op_name}@{dispatch_key}"
    full_key = f"{dispatch_key}\0{op_name}\0".encode() + bytes(key)
    with key_lock(full_key):
        for entry in stored_entries(full_key):
            if entry.metadata.get("needs_cpu_aliases"):
                return ("aliases",)
            if "fallback" in entry.metadata:
                # A recorded failure: do not spend another compile on this signature.
                return ("fallback", entry.metadata["fallback"])
            if entry.variant_id not in known:
                _stats.count(stat_key, "disk_loads")
                return ("kernel", entry.variant_id, entry.artifact_path, int(entry.metadata["num_outputs"]))
        # Only a real miss pays for importing the compiler (sympy, Inductor).
        from eagerc._compiler import CompileError, NeedsCpuAliases, SpecializeValues, compile_call

        op = _overload(op_name)
        try:
            kernel = compile_call(op, args, specialize, dispatch_key)
        except NeedsCpuAliases:
            log.info("eagerc: %s calls ATen CPU kernels; it runs on CPU aliases on %s", op_name, dispatch_key)
            store().add(full_key, b"", {"needs_cpu_aliases": True, "op": op_name, "num_outputs": 0})
            return ("aliases",)
        except SpecializeValues:
            log.info("eagerc: %s: lifted scalars did not trace; specializing scalar values", op_name)
            return ("specialize",)
        except CompileError as e:
            log.info("eagerc: %s not compiled: %s", op_name, e)
            remember_failure(full_key, op_name, str(e))
            return ("fallback", str(e))
        _stats.count(stat_key, "compiles")
        _stats.count(stat_key, "compile_seconds", kernel.seconds)
        log.info("eagerc: compiled %s in %.2f s", kernel.description, kernel.seconds)
        metadata = {"num_outputs": kernel.num_outputs, "op": op_name, "signature": kernel.description,
                    "guard": kernel.guard_source, "compile_seconds": kernel.seconds}
        entry = store().add(full_key, kernel.library, metadata)
        return ("kernel", entry.variant_id, entry.artifact_path, kernel.num_outputs)


def key_lock(full_key: bytes):
    """The lock under which one key is looked up and, on a miss, compiled (once)."""
    with _store_lock:
        return _key_locks[full_key]


def stored_entries(full_key: bytes) -> list:
    """The store's variants of a key; none (compile without the cache) if it is broken."""
    try:
        return store().get(full_key)
    except Exception as e:  # noqa: BLE001 - a broken store must not break the call
        log.warning("eagerc: kernel cache unavailable (%s); compiling without it", e)
        return []


def remember_failure(full_key: bytes, op_name: str, reason: str) -> None:
    """Record that this signature cannot be compiled, so no process tries again
    (until the namespace changes or `python -m kernel_cache clear`)."""
    try:
        store().add(full_key, b"", {"fallback": reason, "op": op_name, "num_outputs": 0})
    except Exception as e:  # noqa: BLE001 - best effort: losing it costs a compile
        log.warning("eagerc: could not record the failure of %s in the cache: %s", op_name, e)
