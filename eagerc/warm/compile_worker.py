"""warm_cache's compile workers: fresh interpreters (``python -m eagerc.warm.compile_worker``)
that replay calls sent by the parent, one at a time.

Not multiprocessing: its "spawn" re-imports the user's main script in each worker (a
script without an ``if __name__ == "__main__"`` guard would run again), and "fork" would
copy a live torch. The protocol is length-prefixed pickles on the worker's stdin and on a
duplicate of its original stdout; fd 1 itself is pointed at stderr, so anything a
library prints cannot corrupt the stream.
"""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys

_HEADER = struct.Struct("<Q")


def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the worker closed its stream")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the worker closed its stream mid-message")
    return pickle.loads(data)


class Worker:
    """One worker process serving `device_type` as the user's process would."""

    def __init__(self, device_type: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eagerc.warm.compile_worker", device_type],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ))

    def replay(self, call):
        send(self.process.stdin, call)
        return receive(self.process.stdout)

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def replay_task(task):
    """One (call, device type) task on a compile farm's worker (eagerc/_cluster.py): the
    call replayed as a local worker replays it, in a process that may serve many tasks."""
    call, device_type = task
    import eagerc

    if device_type != "eagerc":
        eagerc.enable(device_type)
    from eagerc.warm.replay_call import replay

    return replay(call)


def _serve(device_type: str) -> None:
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import eagerc

    if device_type != "eagerc":
        eagerc.enable(device_type)
    from eagerc.warm.replay_call import replay

    requests = sys.stdin.buffer
    while True:
        try:
            call = receive(requests)
        except EOFError:
            return
        send(results, replay(call))


if __name__ == "__main__":
    _serve(sys.argv[1])
