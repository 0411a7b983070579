"""The compile service: one process per machine (per kernel cache and settings) that
compiles the kernels of misses callers did not wait for, in worker processes of its own.

A caller in background mode (eagerc/per_op/background.py, the default) answers a miss at
once with a kernel that exists and hands the service a description of the call
(:mod:`eagerc.compile_service.call`: the op, its arguments' metadata, the size class, the
device). The service's workers replay the call on stand-in tensors of the same metadata,
so the device's own dispatch compiles exactly the caller's signature, and store the kernel
in the persistent kernel cache (atomically). The caller looks in the store again when that
signature is next called, once the service says the job is done; nothing calls back into
the caller. Because the service is its own process (started detached, in a session of
its own), a short script's misses still reach the cache for the next run.

The pieces, each one job:

- :mod:`~eagerc.compile_service.spool`: the service's folder under the kernel cache (its
  lock, queued jobs, finished-job markers, log) and which service a process talks to;
- :mod:`~eagerc.compile_service.call`: a miss described for another process, and its
  replay there;
- :mod:`~eagerc.compile_service.client`: the caller's side (submit, poll, start the service);
- ``daemon.py``: the service process (standard library only: it never imports torch);
- ``lifeline.py``: its workers end with it, however it ends;
- :mod:`~eagerc.compile_service.worker`: what a worker process runs for one job.
"""
