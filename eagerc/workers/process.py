"""Starting a worker and talking to it: the caller's side of the worker protocol
(eagerc/workers/protocol.py).

The worker is the caller's interpreter (sys.executable, with the caller's interpreter
flags), given the caller's sys.path before it imports anything of eagerc, so it imports
the caller's eagerc and the caller's copy of every other module. ``python -m`` would put
the working directory first: from a checkout of the repository with eagerc installed
elsewhere, workers imported the checkout's eagerc, which has no ``_C``. The working
directory stays the caller's, so relative paths in its settings keep their meaning.

The worker's stdout and stderr are one pipe, which a thread copies to the caller's stderr
or to a log file, keeping the last lines: a worker that dies before it answers (an
ImportError while it starts, a crash inside a kernel) is reported with them.
"""
from __future__ import annotations

import collections
import json
import os
import pickle
import select
import subprocess
import sys
import threading
import time

from eagerc.workers.protocol import ERROR, read_frame, send

# What the worker runs first. Its answer pipe is made non-inheritable at once, so a
# compiler it starts cannot keep the pipe open after the worker itself has died.
_BOOTSTRAP = """\
import json, os, sys
sys.path[:] = json.loads(sys.argv[1])
os.set_inheritable(int(sys.argv[2]), False)
from eagerc.workers.protocol import serve
serve(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
"""

_TAIL_LINES = 3        # output lines a report quotes
_TAIL_CHARS = 600


class WorkerError(Exception):
    """A worker could not answer; str() says why, in the worker's own words where it had any."""


class WorkerFailed(WorkerError):
    """The handler raised on this request; the worker goes on serving."""

    def __init__(self, type_name: str, message: str, where: str = ""):
        self.type_name, self.message, self.where = type_name, message, where
        super().__init__(f"{type_name}: {message}" + (f" (at {where})" if where else ""))


class WorkerDied(WorkerError):
    """The worker's process ended before answering; `output` holds its last lines."""

    def __init__(self, how: str, output: list):
        self.how, self.output = how, output
        super().__init__(f"the worker died ({how}): {quote(output)}")


class WorkerDidNotStart(WorkerError):
    """The worker ended before it was ready to serve: its module's start raised, or the
    process died first (importing eagerc or torch failed, a bad setting)."""


def quote(lines: list) -> str:
    """A worker's last output lines in one line, without traceback underlining."""
    kept = [ln.strip() for ln in lines if ln.strip() and set(ln.strip()) - set("^~ ")]
    return " | ".join(kept[-_TAIL_LINES:])[-_TAIL_CHARS:] or "it printed nothing"


def how_it_ended(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"


def caller_sys_path() -> list:
    """The caller's sys.path, its working-directory entry ("") made absolute."""
    return [os.getcwd() if entry == "" else entry for entry in sys.path]


class WorkerProcess:
    """One worker serving the handler that ``module.start(*args)`` returns. `env`: the
    worker's environment (default: the caller's); `log_path`: where its output goes
    (appended; default: the caller's stderr)."""

    def __init__(self, module: str, *args: str, env: dict | None = None, log_path: str | None = None):
        self._output: collections.deque = collections.deque(maxlen=50)
        self._output_lock = threading.Lock()
        self.ready = False
        self._log = open(log_path, "ab") if log_path else None
        self._answers, answers_end = os.pipe()
        command = [sys.executable, *subprocess._args_from_interpreter_flags(), "-c", _BOOTSTRAP,
                   json.dumps(caller_sys_path()), str(answers_end), module, *args]
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, env=env, pass_fds=(answers_end,))
        except BaseException:
            os.close(self._answers)
            if self._log is not None:
                self._log.close()
            raise
        finally:
            os.close(answers_end)
        self._copier = threading.Thread(target=self._copy_output, daemon=True,
                                        name=f"eagerc worker {self.process.pid} output")
        self._copier.start()

    @property
    def output(self) -> list:
        """The worker's last output lines (stdout and stderr), oldest first."""
        with self._output_lock:
            return list(self._output)

    def start(self, timeout: float | None = None) -> None:
        """Wait until the worker is ready to serve. WorkerDidNotStart with its reason;
        TimeoutError past `timeout` seconds (the worker is left running: kill it)."""
        try:
            kind, payload = self._receive(timeout)
        except WorkerDied as e:
            raise WorkerDidNotStart(f"the worker died before it started ({e.how}): {quote(e.output)}") from None
        if kind == ERROR:
            self._wait_for_exit()
            raise WorkerDidNotStart(f"the worker could not start: {WorkerFailed(*payload)}")
        self.ready = True

    def ask(self, request, timeout: float | None = None):
        """The handler's answer to `request` (started first if need be). WorkerFailed: the
        handler raised; WorkerDied: the process ended; TimeoutError: no answer in time."""
        if not self.ready:
            self.start(timeout)
        try:
            send(self.process.stdin, request)
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerDied(self._wait_for_exit(), self.output) from None
        kind, payload = self._receive(timeout)
        if kind == ERROR:
            raise WorkerFailed(*payload)
        return payload

    def kill(self) -> str:
        """Stop the worker now; returns how it ended ("exit code 1", "signal 9")."""
        if self.process.poll() is None:
            self.process.kill()
        return self._wait_for_exit()

    def close(self) -> None:
        """Let the worker finish (it exits when its requests end); kill it after 30 s."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._wait_for_exit()

    def _receive(self, timeout: float | None):
        if self._answers < 0:  # ended already
            raise WorkerDied(how_it_ended(self.process.returncode), self.output)
        deadline = None if timeout is None else time.monotonic() + timeout

        def read(size: int) -> bytes:
            while deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer in {timeout:g} s")
                if select.select([self._answers], [], [], left)[0]:
                    break
            return os.read(self._answers, size)

        try:
            frame = read_frame(read)
        except EOFError:
            raise WorkerDied(self._wait_for_exit(), self.output) from None
        return pickle.loads(frame)

    def _wait_for_exit(self) -> str:
        """How the process ended, once it has and its output is copied. It closed its
        answer pipe, so it is exiting; a compiler it started may hold its output open a
        little longer, so the copy gets a few seconds, not forever."""
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._copier.join(timeout=5)
        if self._answers >= 0:
            os.close(self._answers)
            self._answers = -1
        return how_it_ended(code)

    def _copy_output(self) -> None:
        with self.process.stdout as output:
            for line in iter(output.readline, b""):
                text = line.decode(errors="replace").rstrip("\n")
                with self._output_lock:
                    self._output.append(text)
                try:
                    if self._log is not None:
                        self._log.write(line)
                        self._log.flush()
                    else:
                        sys.stderr.write(text + "\n")
                except (OSError, ValueError):
                    pass  # the caller's stderr or the log is closed: the tail is still kept
        if self._log is not None:
            self._log.close()
