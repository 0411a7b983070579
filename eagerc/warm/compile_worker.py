"""warm_cache's compile workers (eagerc/workers): processes that replay the calls the
caller sends, one at a time, each answered with its ReplayResult; and the same replay as
a task of a compile farm (eagerc/_cluster.py)."""
from __future__ import annotations


def start(device_type: str):
    """A worker's setup (eagerc/workers/protocol.py): serve `device_type` as the user's
    process would; the handler replays one call."""
    from eagerc.per_op.registration import enable  # (importing it registers the eagerc device)

    if device_type != "eagerc":
        enable(device_type)
    from eagerc.warm.replay_call import replay

    return replay


def replay_task(task):
    """One (call, device type) task on a compile farm's worker (eagerc/_cluster.py): the
    call replayed as a local worker replays it, in a process that may serve many tasks."""
    call, device_type = task
    return start(device_type)(call)
