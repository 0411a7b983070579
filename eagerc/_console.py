"""What a person at the command line sees while eagerc works: log lines and progress.

Library use leaves logging to the application (the ``eagerc`` logger has no handler of its
own); the command-line entry points (``python -m eagerc ...``, ``python -m
eagerc.coverage``) call :func:`log_to_console`, so eagerc's INFO records (each compile:
op, signature, seconds) reach stderr as they happen.

:func:`progress` is a tqdm bar when stderr is a terminal; anywhere else (a log file, CI,
a pipe) it writes plain lines through the ``eagerc`` logger instead, so a run that is
not watched on a terminal still says how far it got, and a library user sees them only
where logging is configured.

:func:`heartbeat` fills the gaps: while it is active, a stretch of `every` seconds without
a console line gets one saying what is still running, so no step goes quiet for long.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

log = logging.getLogger("eagerc")
_last_line = time.monotonic()  # when the console last got a line (heartbeat's clock)


def mark_line() -> None:
    """Note that a line reached the console just now (a print of the caller's own)."""
    global _last_line
    _last_line = time.monotonic()


class _ConsoleHandler(logging.Handler):
    """Writes records to stderr through tqdm.write, which keeps an active bar intact.
    Below WARNING a record shows its first line only (a refusal's text can carry a whole
    traceback); with the logger at DEBUG everything is shown."""

    def emit(self, record: logging.LogRecord) -> None:
        mark_line()
        try:
            message = self.format(record)
            if record.levelno < logging.WARNING and not log.isEnabledFor(logging.DEBUG):
                first, newline, _ = message.partition("\n")
                message = first + (" [...]" if newline else "")
            try:
                from tqdm import tqdm

                tqdm.write(message, file=sys.stderr)
            except ImportError:
                print(message, file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging never breaks the program
            self.handleError(record)


def log_to_console(level: int = logging.INFO) -> None:
    """Send the ``eagerc`` logger's records at `level` and above to stderr (once)."""
    if any(isinstance(h, _ConsoleHandler) for h in log.handlers):
        return
    handler = _ConsoleHandler(level)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    if log.level == logging.NOTSET or log.level > level:
        log.setLevel(level)


def on_terminal() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


class PlainProgress:
    """tqdm's update/set_postfix_str/close, written as log lines: one per `every` steps
    or `seconds` seconds, whichever comes first, and one at the end."""

    def __init__(self, total=None, desc: str = "", unit: str = "it", every: int = 1,
                 seconds: float = 5.0):
        self.total, self.desc, self.unit = total, desc, unit
        self.every, self.seconds = max(1, every), seconds
        self.n, self._postfix = 0, ""
        self._start = self._last_time = time.monotonic()
        self._last_n = 0

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self._postfix = text

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.n - self._last_n >= self.every or now - self._last_time >= self.seconds \
                or (self.total is not None and self.n >= self.total):
            self._write(now)

    def _write(self, now: float) -> None:
        self._last_n, self._last_time = self.n, now
        of = f"/{self.total}" if self.total is not None else ""
        tail = f" (last: {self._postfix})" if self._postfix else ""
        log.info("%s: %d%s %s done, %.0f s%s", self.desc, self.n, of, self.unit, now - self._start, tail)

    def close(self) -> None:
        if self.n != self._last_n:
            self._write(time.monotonic())


@contextlib.contextmanager
def heartbeat(status, every: float = 7.0):
    """While the block runs, log ``status()`` (a short text: what is running) whenever
    `every` seconds pass without a console line, with the seconds since the block began.

        >>> with heartbeat(lambda: "compiling aten::addmm"):
        ...     pass
    """
    start = time.monotonic()
    mark_line()
    stop = threading.Event()

    def beat():
        while not stop.wait(1.0):
            now = time.monotonic()
            if now - _last_line >= every:
                try:
                    text = status()
                except Exception:  # noqa: BLE001 - a status text never breaks the work
                    text = "working"
                log.info("  ... %s (%.0f s)", text, now - start)
                mark_line()

    thread = threading.Thread(target=beat, daemon=True, name="eagerc-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class CompileLines(logging.Handler):
    """Keeps the compile/cache service's "eagerc: compiled <op(signature)> in <s> s" lines
    (eagerc/cache.py) while installed, so the compiles of a worker process can be shown by
    the process that drives it. `suffix` is added to each line (what the caller is doing)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list = []
        self.suffix = ""

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith("eagerc: compiled "):
            self.lines.append(record.getMessage() + self.suffix)


@contextlib.contextmanager
def compile_lines():
    """Collect the compile lines logged inside the block (the ``eagerc`` logger at INFO
    meanwhile, wherever the application set it)."""
    handler = CompileLines()
    level = log.level
    log.addHandler(handler)
    if not log.isEnabledFor(logging.INFO):
        log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def progress(total=None, desc: str = "", unit: str = "it", every: int = 1, leave: bool = True):
    """A tqdm bar on a terminal, else :class:`PlainProgress` (`every`: steps per line)."""
    if on_terminal():
        try:
            from tqdm import tqdm

            return tqdm(total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr)
        except ImportError:
            pass
    return PlainProgress(total, desc, unit, every=every)
