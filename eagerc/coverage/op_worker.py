"""Coverage workers: fresh interpreters (``python -m eagerc.coverage.op_worker DEVICE``) that
run (overload, dtype) tasks sent by the runner, one at a time, and answer one result
record each.

Subprocesses, not multiprocessing (whose "spawn" re-imports the caller's main script and
whose "fork" would copy a live torch): a worker that crashes or hangs is killed and
replaced by the runner, and that task's result is the crash or the timeout. The protocol
is length-prefixed pickles on the worker's stdin and on a duplicate of its original
stdout; fd 1 itself is pointed at stderr (a log file), so what a library prints cannot
corrupt the stream.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys

_HEADER = struct.Struct("<Q")


def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_exactly(read, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = read(left)
        if not chunk:
            raise EOFError("the worker closed its stream")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(stream):
    (size,) = _HEADER.unpack(read_exactly(stream.read, _HEADER.size))
    return pickle.loads(read_exactly(stream.read, size))


def _serve(device: str) -> None:
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # One thread per worker: the runner runs one worker per core.
    import torch

    torch.set_num_threads(1)
    import eagerc  # noqa: F401  (registers the eagerc device)
    from eagerc import _console
    from eagerc.coverage.execute import Device, install_load_recorder, run_task

    dev = Device(device)
    dev.warm_up()  # before recording loads: its kernel is no task's
    install_load_recorder()
    send(results, {"ready": True})
    requests = sys.stdin.buffer
    while True:
        try:
            task = receive(requests)
        except EOFError:
            return
        print(f"coverage worker: {task['op']} {task['dtype']}", file=sys.stderr, flush=True)
        try:
            with _console.compile_lines() as compiled:
                record = run_task(task, dev)
            record["compile_lines"] = compiled.lines  # the runner shows them, then drops them
        except Exception as e:  # noqa: BLE001 - the tool's own failure on this op, reported
            import traceback

            traceback.print_exc()
            record = {"op": task["op"], "dtype": task["dtype"], "status": "error",
                      "detail": f"coverage could not check it: {type(e).__name__}: {str(e)[:200]}"}
        send(results, record)


if __name__ == "__main__":
    _serve(sys.argv[1])
