"""One compile at a time in a process.

make_fx's module patcher (torch.fx's CURRENT_PATCHER) and Inductor's configuration and
virtualized state are process-global: two threads tracing at once corrupt each other
("CURRENT_PATCHER is None in finally block"), and that failure says nothing about either
call. Compiles take seconds; serializing them costs little (warm_cache compiles in worker
processes), and a hit never takes this lock. Reentrant: a compile may trace inside a trace.
"""
import threading

compile_lock = threading.RLock()
