"""The worker protocol (eagerc/workers/) that warm_cache and the coverage tool share: a
worker imports the caller's modules whatever its working directory holds, answers
requests in order (a large one whole), reports its own errors, and one that cannot start
says why in its own words."""
from __future__ import annotations

import os
import textwrap

import pytest

import eagerc
from eagerc.workers import WorkerDidNotStart, WorkerDied, WorkerFailed, WorkerProcess

MODULE = "eagerc_test_echo_worker"

ECHO_WORKER = textwrap.dedent("""
    import os
    import sys


    def start(*args):
        if "refuse" in args:
            raise RuntimeError("planted: this worker refuses to start")
        if "die" in args:
            print("planted: dying before the first answer", file=sys.stderr, flush=True)
            os._exit(7)

        def handle(request):
            kind, value = request
            if kind == "raise":
                raise ValueError(value)
            if kind == "print":
                print(value)
                return "printed"
            if kind == "where":
                import eagerc
                return {"eagerc": eagerc.__file__, "worker": __file__, "cwd": os.getcwd()}
            if kind == "exit":
                os._exit(value)
            return value

        return handle
""")


@pytest.fixture
def echo_worker(tmp_path, monkeypatch):
    """The worker module, importable through the caller's sys.path only (not on PYTHONPATH,
    not in the working directory), and a working directory that holds decoys of it and of
    eagerc, as a checkout of the repository holds an eagerc without _C."""
    home = tmp_path / "callers_modules"
    home.mkdir()
    (home / f"{MODULE}.py").write_text(ECHO_WORKER)
    monkeypatch.syspath_prepend(str(home))
    checkout = tmp_path / "checkout"
    (checkout / "eagerc").mkdir(parents=True)
    (checkout / "eagerc" / "__init__.py").write_text('raise ImportError("the working directory\'s eagerc")\n')
    (checkout / f"{MODULE}.py").write_text('raise ImportError("the working directory\'s worker module")\n')
    monkeypatch.chdir(checkout)
    return home / f"{MODULE}.py"


def test_a_worker_imports_the_callers_modules_and_answers_in_order(echo_worker, tmp_path):
    log = tmp_path / "worker.log"
    worker = WorkerProcess(MODULE, log_path=str(log))
    try:
        worker.start(timeout=300)
        assert worker.ask(("where", None)) == {"eagerc": eagerc.__file__, "worker": str(echo_worker),
                                               "cwd": os.getcwd()}
        big = os.urandom(4 << 20)  # far more than a pipe holds: read in pieces
        assert worker.ask(("echo", big)) == big
        with pytest.raises(WorkerFailed) as failed:
            worker.ask(("raise", "planted: the handler's own error"))
        assert (failed.value.type_name, failed.value.message) == ("ValueError", "planted: the handler's own error")
        assert failed.value.where.startswith(f"{MODULE}.py:")
        # What a library prints goes to the worker's output, not into the answers.
        assert worker.ask(("print", "a library's chatter")) == "printed"
        assert worker.ask(("echo", [1, {"two": 2}])) == [1, {"two": 2}]
        with pytest.raises(WorkerDied) as died:
            worker.ask(("exit", 5))
        assert died.value.how == "exit code 5"
    finally:
        worker.kill()
    output = log.read_text()
    assert "a library's chatter" in output
    assert "ValueError: planted: the handler's own error" in output  # its traceback, for the log's reader


@pytest.mark.parametrize("how, reason", [
    ("refuse", "the worker could not start: RuntimeError: planted: this worker refuses to start (at "),
    ("die", "the worker died before it started (exit code 7): planted: dying before the first answer"),
])
def test_a_worker_that_cannot_start_says_why(echo_worker, how, reason):
    worker = WorkerProcess(MODULE, how)
    try:
        with pytest.raises(WorkerDidNotStart) as failed:
            worker.start(timeout=300)
    finally:
        worker.kill()
    assert str(failed.value).startswith(reason), str(failed.value)
    assert "EOFError" not in str(failed.value)
