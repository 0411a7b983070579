"""Worker processes, shared by warm_cache (eagerc/warm) and the coverage tool (eagerc/coverage).

A worker is a fresh interpreter: the caller's own (sys.executable) with the caller's
sys.path, so it imports the caller's eagerc whatever the working directory holds. It
imports a worker module, calls its ``start(*args)`` once, and answers each request the
caller sends with what the returned handler gives back, one at a time.

- protocol.py: the messages on the wire, and the worker's side (``serve``).
- process.py: the caller's side (``WorkerProcess``) and what it raises when a worker
  cannot answer: the worker's own error, never a bare end of stream.

Fresh interpreters, not multiprocessing: its "spawn" re-imports the caller's main script
(a script without an ``if __name__ == "__main__"`` guard would run again), and "fork"
would copy a live torch.
"""
from eagerc.workers.process import (WorkerDidNotStart, WorkerDied, WorkerError, WorkerFailed,
                                    WorkerProcess)

__all__ = ["WorkerProcess", "WorkerError", "WorkerFailed", "WorkerDied", "WorkerDidNotStart"]
