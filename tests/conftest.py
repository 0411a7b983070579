"""Shared fixtures: every test session gets its own kernel cache directory, so tests
never read or write the user's kernel cache (~/.cache/eagerc, or $EAGERC_CACHE_DIR, which
is replaced here, not honoured) nor a shared remote tier ($EAGERC_REMOTE_CACHE is dropped;
the Redis tests start their own server); compiled kernels are shared across the tests of
one session (compiling is the slow part) and removed when the session ends
(``EAGERC_TEST_KEEP_CACHE=1`` keeps it). Inductor's own caches stay shared: they hold
build products, not eagerc's kernels. Misses compile in the test's process
(``EAGERC_COMPILE=now``), except where a test asks for background mode.

Under pytest-xdist (``-n 2``, with pyproject's ``--dist loadfile``: a test file runs whole,
in order, on one worker) every worker has a session cache of its own, so a worker sees
exactly what a serial run of its files would.

A line per finished test file (its counts and seconds, the run's elapsed time) and, after
20 quiet seconds, a "still collecting" line (each xdist worker imports every test file
first) or a "still running" line naming the longest-running test keep a quiet ``-q`` run
visibly alive.

Slow tests (models, multi-process, > ~20 s; marked ``slow``) are deselected by
pyproject's ``addopts``; ``python -m pytest -m slow`` runs them, ``-m ""`` everything.
The long sweeps named in tests/default_share.py keep a fixed share of their cases in the
default run; the rest of each is marked slow."""
from __future__ import annotations

import collections
import importlib.abc
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time

import pytest

import default_share

_SESSION_CACHE = tempfile.mkdtemp(prefix="eagerc-test-cache-")
os.environ["EAGERC_CACHE_DIR"] = _SESSION_CACHE
os.environ.pop("EAGERC_REMOTE_CACHE", None)
# The suite compiles before answering ("now"): most tests count a miss's compile in the
# test's own process. The default, background mode (a miss answered at once, its kernel
# compiled by the compile service), is tested where it is asked for:
# tests/test_background_compile.py and tests/test_background_random_streams.py.
os.environ["EAGERC_COMPILE"] = "now"

_TORCH_TEST_UTILS = "torch.testing._internal.common_utils"


class _CheapTestFnLookup(importlib.abc.MetaPathFinder):
    """Loads torch's common_utils as usual when a test first imports it (OpInfo's op_db),
    then gives it eagerc.unittest_frames.running_unittest_fn as extract_test_fn (torch's
    walks inspect.stack(), 0.4 s a call under pytest's deep stacks, twice per
    OpInfo.sample_inputs call: 40 s of each worker's collection went to it), before
    opinfo.core imports the name. Importing it here instead would cost every run seconds,
    OpInfo used or not."""

    def find_spec(self, name, path=None, target=None):
        if name != _TORCH_TEST_UTILS:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            from eagerc.unittest_frames import running_unittest_fn

            module.extract_test_fn = running_unittest_fn

        spec.loader.exec_module = exec_module
        return spec


if _TORCH_TEST_UTILS in sys.modules:  # a plugin imported it before this file
    from eagerc.unittest_frames import running_unittest_fn

    for _module in (_TORCH_TEST_UTILS, "torch.testing._internal.opinfo.core"):
        if _module in sys.modules:
            sys.modules[_module].extract_test_fn = running_unittest_fn
else:
    sys.meta_path.insert(0, _CheapTestFnLookup())


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache directory and empty in-memory tables for one test."""
    import eagerc
    from eagerc import _C
    from eagerc.cache import service

    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "cache"))
    service().reset()
    _C._clear_tables()
    eagerc.reset_stats()
    yield tmp_path / "cache"
    service().reset()
    _C._clear_tables()


@pytest.fixture
def miss_keys(fresh_cache):
    """(op name, signature key bytes) of every L1 miss the resolver sees, in order: the
    key its answer is for (the call's key with scalar values, when the lifted scalars did
    not trace)."""
    from eagerc import _C
    from eagerc.per_op import registration as ops

    keys = []

    def recording(request):
        answer = ops._resolve(request)
        keyed = request.with_values if answer.specialized and request.with_values else request
        keys.append((request.op_name, bytes(keyed.key)))
        return answer

    _C._set_resolver(recording)
    yield keys
    _C._set_resolver(ops._resolve)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) reports
        config.pluginmanager.register(_FileProgress(config), "eagerc-file-progress")
    if os.environ.get("EAGERC_BACKING", "cpu").lower() == "cuda":
        # The eagerc device on GPU memory is compared with CPU eager: full fp32 on the GPU.
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


@pytest.hookimpl(tryfirst=True)  # the marks must be there before -m "not slow" selects
def pytest_collection_modifyitems(config, items):
    default_share.mark_the_rest_slow(items)


@pytest.fixture
def tiny_bert():
    """A factory of transformers' BertModel (2 layers, hidden 32), same weights each call."""
    transformers = pytest.importorskip("transformers")
    import torch

    def build():
        torch.manual_seed(0)
        cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=100,
                                      max_position_embeddings=64)
        return transformers.BertModel(cfg).eval()

    return build


def pytest_sessionfinish(session, exitstatus):
    """The session's kernel cache goes with the session (tests' subprocesses are done)."""
    if os.environ.get("EAGERC_TEST_KEEP_CACHE", "") not in ("", "0"):
        return
    if os.environ.get("EAGERC_CACHE_DIR") == _SESSION_CACHE:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


class _FileProgress:
    """One line per test file as its last test finishes ("[2:41] tests/test_x.py: 12 passed,
    1 skipped in 34 s"), and a "still collecting" or "still running" line when 20 s pass
    without one, from the session's start (collection included). Works with
    and without xdist: the totals per file come from the collection (the controller's copy
    of a worker's, under xdist), the outcomes from the reports every test sends."""

    QUIET_S = 20.0

    def __init__(self, config):
        self.config = config
        self.start = self.last_line = time.monotonic()
        self.total = collections.Counter()      # file -> tests collected
        self.done = collections.Counter()       # file -> tests finished
        self.outcomes = collections.defaultdict(collections.Counter)
        self.first_start = {}                   # file -> monotonic time of its first test
        self.running = {}                       # nodeid -> monotonic start
        self.finished = 0
        self.collected_by = 0                   # xdist workers done collecting
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.watchdog = None

    def _write(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        elapsed = int(time.monotonic() - self.start)
        reporter.write_line(f"[{elapsed // 60}:{elapsed % 60:02d}] {text}")
        reporter._tw.flush()
        self.last_line = time.monotonic()

    def _count(self, nodeids) -> None:
        with self.lock:
            if self.total:
                return  # every xdist worker collects the same items
            for nodeid in nodeids:
                self.total[nodeid.split("::", 1)[0]] += 1

    def pytest_sessionstart(self, session):
        self.watchdog = threading.Thread(target=self._watch, daemon=True)
        self.watchdog.start()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        self._count(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        with self.lock:
            self.collected_by += 1
        self._count(ids)

    def pytest_runtest_logstart(self, nodeid, location):
        with self.lock:
            self.running[nodeid] = time.monotonic()
            self.first_start.setdefault(nodeid.split("::", 1)[0], time.monotonic())

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            with self.lock:
                self.outcomes[report.nodeid.split("::", 1)[0]][report.outcome] += 1

    def pytest_runtest_logfinish(self, nodeid, location):
        path = nodeid.split("::", 1)[0]
        with self.lock:
            self.running.pop(nodeid, None)
            self.finished += 1
            self.done[path] += 1
            if self.done[path] != self.total.get(path):
                return
            counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes[path].items()))
            seconds = time.monotonic() - self.first_start.get(path, self.start)
            self._write(f"{path}: {counts or 'nothing run'} in {seconds:.0f} s "
                        f"({self.finished}/{sum(self.total.values())} tests done)")

    def _watch(self) -> None:
        while not self.stop.wait(2.5):
            with self.lock:
                if time.monotonic() - self.last_line < self.QUIET_S:
                    continue
                if not self.running:
                    if not self.finished:  # no test has started: collection
                        workers = self.config.getoption("numprocesses", None)
                        of = f" ({self.collected_by} of {workers} workers done)" if workers else ""
                        self._write(f"still collecting{of}: importing the test files, OpInfo's "
                                    f"op_db the longest")
                    continue
                nodeid, since = min(self.running.items(), key=lambda kv: kv[1])
                self._write(f"still running: {nodeid} ({time.monotonic() - since:.0f} s; "
                            f"{self.finished}/{sum(self.total.values())} tests done)")

    def pytest_sessionfinish(self, session):
        self.stop.set()
