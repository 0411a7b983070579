"""Background compilation: a miss need not wait for its compile.

With ``EAGERC_COMPILE=background`` (or ``enable(device, compile="background")``), a call
whose kernel is neither in L1 nor in a store is served at once by a kernel that already
exists, and its own kernel compiles on a background thread:

- override mode (cpu, cuda): the device's own kernel;
- the eagerc device: ATen's kernel of its memory's home device on zero-copy aliases
  (csrc/kernel_holder.cpp, ``run_interim``).

Such calls count as ``interim`` in ``eagerc.stats()``. The compile goes through the same
compile/cache service (stored atomically, so a process that exits mid-compile leaves no
broken entry) and loads the kernel on the background thread. Only the holder's own thread
can put a kernel into its C++ table (L1), so the kernel waits here, ready: the next call of
that signature takes it without a store lookup and counts as a hit (the caller found its
kernel ready; ``eagerc.stats()`` moves it from misses to hits), and later calls hit in L1.
A background compile that does not produce a kernel is not retried in the background: the
next miss decides in the foreground, with the call's real arguments.

The background thread never draws from the caller's random streams (the process's
generators, which torch.manual_seed seeds): random ops are not deferred (they compile on
the caller's thread, at their first call), and the compiles it runs draw nothing
(eagerc/random_streams.py).

The background compile sees fresh tensors with the call's sizes, strides, offsets and
dtypes (zero bytes, made without any dispatch), never the caller's tensors, which the
program may change or free meanwhile.
"""
from __future__ import annotations

import atexit
import queue
import threading

import torch

from eagerc import _config, _stats, random_streams
from eagerc.aten_meta import storage_extent
from eagerc.refusals import Deferred

_modes: dict = {}          # device -> "now" | "background" (set by enable)


def set_mode(device: str, mode) -> None:
    if mode is None:
        _modes.pop(device, None)
        return
    if mode not in ("now", "background"):
        raise ValueError(f"compile={mode!r}: expected 'now' or 'background'")
    _modes[device] = mode


def is_background(device: str) -> bool:
    return _modes.get(device, _config.compile_mode()) == "background"


def _snapshot(value):
    """A stand-in of `value` with the same metadata, built without dispatching an op
    (no kernel of any enabled device runs)."""
    if isinstance(value, torch.Tensor):
        t = value
        extent = storage_extent(t.shape, t.stride(), t.storage_offset())
        raw = torch.frombuffer(bytearray(max(extent, 1) * t.element_size()), dtype=torch.uint8)
        base = raw.view(t.dtype)[:extent] if t.dtype != torch.bool else raw[:extent].view(torch.bool)
        if t.device.type != "cpu":
            base = base.to(t.device)
        return base.as_strided(t.shape, t.stride(), t.storage_offset())
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


class BackgroundCompiler:
    """One daemon thread compiling queued calls, in order."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._pending: set = set()
        self._given_up: set = set()
        self._ready: dict = {}  # key -> (cache directory, loaded kernel), not yet in L1
        self._lock = threading.Lock()
        self._thread = None
        self._stopping = False

    def defer(self, key_id, stat_key: str, job) -> None:
        """Queue `job(args_snapshot) -> bool` (True: a kernel or a recorded refusal is in
        the store) unless this key is queued already, then raise Deferred. A key whose
        background compile gave nothing is not deferred again: returns, and the caller
        compiles in the foreground."""
        with self._lock:
            if key_id in self._given_up or self._stopping:
                return
            if key_id not in self._pending:
                self._pending.add(key_id)
                self._queue.put((key_id, stat_key, job))
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="eagerc-background-compile",
                                                    daemon=True)
                    self._thread.start()
        raise Deferred()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._stopping:
                self._queue.task_done()
                return
            key_id, stat_key, job = item
            try:
                try:
                    # This thread draws nothing from the caller's random streams.
                    with random_streams.elsewhere():
                        ok = job()
                except Exception:  # noqa: BLE001 - the foreground decides next time
                    ok = False
                with self._lock:
                    self._pending.discard(key_id)
                    if not ok:
                        self._given_up.add(key_id)
                if ok:
                    _stats.count(stat_key, "background_compiles")
            finally:
                self._queue.task_done()

    def wait(self) -> None:
        """Until every queued compile has finished."""
        self._queue.join()

    def keep_ready(self, key_id, kernel) -> None:
        """A kernel this thread compiled (or loaded) for `key_id`, for its next miss."""
        with self._lock:
            self._ready[key_id] = (_cache_directory(), kernel)

    def take_ready(self, key_id, known_variants=()):
        """The kernel kept for `key_id`, once; None when there is none, when the kernel
        cache directory changed since (a kernel of another cache is not this one's), or
        when the caller's table holds that variant already (its guard failed)."""
        with self._lock:
            kept = self._ready.pop(key_id, None)
        if kept is None:
            return None
        directory, kernel = kept
        if directory != _cache_directory() or kernel.variant_id in known_variants:
            return None
        return kernel

    def is_pending(self, key_id) -> bool:
        with self._lock:
            return key_id in self._pending

    def shutdown(self) -> None:
        """At exit: drop what is queued and let the compile in progress finish (its
        store is atomic either way, but a thread torn down inside Inductor or the C++
        compiler's runtime can abort the interpreter's exit)."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            self._queue.task_done()
        if thread is not None and thread.is_alive():
            self._queue.put(None)  # wakes the thread when it was idle
            thread.join(timeout=120)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)


def _cache_directory() -> str:
    from kernel_cache.layout import default_directory

    return default_directory()


_compiler = BackgroundCompiler()
atexit.register(_compiler.shutdown)


def compiler() -> BackgroundCompiler:
    return _compiler


def snapshot_args(args):
    return tuple(_snapshot(a) for a in args)
