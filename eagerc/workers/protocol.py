"""The worker protocol's messages, and the worker's side of it.

Requests are length-prefixed pickles on the worker's stdin. Answers are length-prefixed
pickles of ``(kind, payload)`` on a pipe of the worker's own, not fd 1 (what a library
prints goes to the worker's output, which the caller copies, and cannot corrupt the
stream):

- ``("ready", None)``: the worker module's ``start(*args)`` returned its handler;
- ``("answer", value)``: what the handler returned for one request;
- ``("error", (type name, message, where))``: the handler raised on one request (the
  worker goes on), or ``start`` did (the worker then exits).

Every read loops until the whole message is there: a pipe hands a large message over in
pieces.
"""
from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
import traceback

HEADER = struct.Struct("<Q")
READY, ANSWER, ERROR = "ready", "answer", "error"


def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def read_exactly(read, size: int) -> bytes:
    """`size` bytes from `read` (a file's read, or a function of the byte count); EOFError
    if the stream ends first."""
    chunks, left = [], size
    while left:
        chunk = read(left)
        if not chunk:
            raise EOFError("the stream ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(read) -> bytes:
    """One message's pickled bytes."""
    (size,) = HEADER.unpack(read_exactly(read, HEADER.size))
    return read_exactly(read, size)


def describe(error: BaseException) -> tuple:
    """(type name, message, where): an exception as the caller reports it; `where` is the
    innermost frame of its traceback ("file.py:12 in f")."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return type(error).__name__, str(error), where


def _answer(results, kind: str, payload) -> None:
    try:
        data = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - an answer that cannot travel is the request's error
        traceback.print_exc()
        data = pickle.dumps((ERROR, describe(e)), protocol=pickle.HIGHEST_PROTOCOL)
    results.write(HEADER.pack(len(data)) + data)
    results.flush()


def serve(results_fd: int, module: str, args: list) -> None:
    """The worker's loop: ``module.start(*args)`` gives the handler, then each request on
    stdin gets one answer on `results_fd`, until the caller closes stdin. A failure is
    also printed (traceback) to the worker's output, which the caller copies or logs."""
    sys.stdout = sys.stderr  # line-buffered: printed lines reach the caller's copy in order
    results = os.fdopen(results_fd, "wb")
    try:
        handle = importlib.import_module(module).start(*args)
    except Exception as e:  # noqa: BLE001 - the caller reports why this worker could not start
        traceback.print_exc()
        _answer(results, ERROR, describe(e))
        return
    _answer(results, READY, None)
    requests = sys.stdin.buffer
    while True:
        try:
            frame = read_frame(requests.read)
        except EOFError:
            return  # the caller is done
        try:
            kind, payload = ANSWER, handle(pickle.loads(frame))
        except Exception as e:  # noqa: BLE001 - this request's error; the worker goes on
            traceback.print_exc()
            kind, payload = ERROR, describe(e)
        _answer(results, kind, payload)
