"""What a newcomer meets in README's first hour: the command-line tools say what they are
doing (no long silences), count what was compiled the way the demo does, refuse a missing
cache directory, print plain --help, and eagerc.stats() prints as a table."""
from __future__ import annotations

import doctest
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from kernel_cache import DiskStore, Namespace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = Namespace(format_version=1, torch_version="2.13.0", eagerc_version="0.1.0",
               target_arch="cpu-avx512", compiler_settings="3f2a9c01")


def cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env={**os.environ, **(env or {})})


# -- kernel_cache: kernels counted as the demo counts them, a missing directory refused --------

def _cache_with_a_marker(directory) -> None:
    store = DiskStore(str(directory), namespace=NS)
    store.add(b"op\0cpu\0aten::native_layer_norm\0a", b"k" * 100,
              {"op": "aten::native_layer_norm", "signature": "aten::native_layer_norm(float32[s,s] C)"})
    # The entry that sends a signature to kernels specialized on its scalar values: no kernel.
    store.add(b"op\0cpu\0aten::native_layer_norm\0b", b"",
              {"op": "aten::native_layer_norm", "num_outputs": "0",
               "specialize_values": "Expected a value of type 'float' for argument 'eps'"})
    store.add(b"op\0cpu\0aten::nonzero\0c", b"", {"op": "aten::nonzero", "fallback": "data-dependent"})
    store.close()


def test_info_counts_kernels_apart_from_entries_without_one(tmp_path):
    _cache_with_a_marker(tmp_path / "c")
    done = cli("kernel_cache", "info", "--dir", str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    assert "keys 3, variants 3, artifact bytes 100 (1 kernels)" in done.stdout
    assert "total: 1 namespaces, 3 keys, 3 variants, 100 bytes (1 kernels)" in done.stdout
    assert "2 entries hold no kernel" in done.stdout


def test_list_names_every_row_and_says_what_hits_count(tmp_path):
    _cache_with_a_marker(tmp_path / "c")
    done = cli("kernel_cache", "list", "--dir", str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    assert "#" not in done.stdout and "op|cpu|" not in done.stdout  # no raw keys
    assert "no kernel: its kernels are specialized on the values of scalar arguments" in done.stdout
    assert "1 kernels, 2 entries without one; hits: loads of the entry" in done.stdout


@pytest.mark.parametrize("command", ["info", "list", "stats", "verify", "clear", "prune"])
def test_a_missing_cache_directory_is_an_error(tmp_path, command):
    done = cli("kernel_cache", command, "--dir", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "0 namespaces" not in done.stdout
    assert not (tmp_path / "nowhere").exists()


# -- --help is plain text -----------------------------------------------------------------------

@pytest.mark.parametrize("command", [["eagerc"], ["eagerc", "warm"], ["eagerc.coverage"], ["kernel_cache"]])
def test_help_has_no_rst_markup(command):
    done = cli(*command, "--help")
    assert done.returncode == 0 and "usage:" in done.stdout
    assert "``" not in done.stdout


# -- coverage: a glob takes the underscore form; only the OpInfo entries of the selection run ----

def test_a_glob_takes_the_one_underscore_form():
    from eagerc.coverage.enumerate import all_overloads, select

    names = all_overloads()
    softmax = select(["aten::softmax*"], names)
    assert "aten::_softmax" in softmax and "aten::softmax.int" in softmax
    assert "aten::_softmax_backward_data" in softmax
    assert select(["_softmax"], names) == ["aten::_softmax"]       # spelled out: only that one
    assert "aten::__and__.Tensor" not in select(["and*"], names)   # dunders only by name
    assert select(["add.Tensor"], names) == ["aten::add.Tensor"]


def test_a_selection_runs_only_the_opinfo_entries_named_like_it():
    from torch.testing._internal.common_methods_invocations import op_db

    from eagerc.coverage.samples import _related

    wanted = {"aten::_softmax", "aten::_softmax_backward_data", "aten::add.Tensor"}
    related = sorted({o.name for o in op_db if _related(o, wanted)})
    assert "softmax" in related and "add" in related
    assert len(related) < 10, related  # not op_db's ~700 entries
    assert not any(name.startswith(("addmm", "addcmul", "log_softmax")) for name in related), related


# -- eagerc.stats() prints as a table and is still the dict -------------------------------------

def test_stats_prints_a_table_and_is_a_dict():
    import eagerc
    from eagerc import _stats

    assert doctest.testmod(_stats).failed == 0
    stats = eagerc.stats()
    assert isinstance(stats, dict) and "ops" in stats and "compiles" in stats
    text = str(stats)
    assert text.startswith("eagerc.stats(): ") and repr(stats) == text
    empty = _stats.Stats({"hits": 0, "misses": 0, "compiles": 0, "disk_loads": 0, "fallbacks": 0,
                          "compile_seconds": 0.0, "ops": {}})
    assert "no op reached an enabled device" in str(empty)
    with_reason = _stats.Stats({**empty, "fallbacks": 1, "ops": {"aten::nonzero@CPU": {
        "hits": 0, "misses": 1, "compiles": 0, "disk_loads": 0, "fallbacks": 1,
        "fallback_reasons": {"data-dependent output size\ndetails": 1}}}})
    assert "aten::nonzero fell back 1x: data-dependent output size" in str(with_reason)


# -- the heartbeat fills quiet stretches --------------------------------------------------------

class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_heartbeat_says_what_still_runs_after_a_quiet_stretch():
    from eagerc import _console

    lines = _Lines()
    _console.log.addHandler(lines)
    level = _console.log.level
    _console.log.setLevel(logging.INFO)
    try:
        with _console.heartbeat(lambda: "compiling aten::abs", every=1.0):
            time.sleep(3.5)
        quiet = len(lines.lines)
        with _console.heartbeat(lambda: "never said", every=30.0):
            time.sleep(0.2)
    finally:
        _console.log.removeHandler(lines)
        _console.log.setLevel(level)
    assert 2 <= quiet <= 4, lines.lines
    assert all(line.startswith("  ... compiling aten::abs (") for line in lines.lines)
    assert len(lines.lines) == quiet


def test_inductors_proxy_executor_note_is_filtered_only_while_eagerc_compiles():
    from eagerc.compile.inductor_wrapper import _quiet_proxy_executor

    inductor_ir = logging.getLogger("torch._inductor.ir")
    lines = _Lines()
    inductor_ir.addHandler(lines)
    try:
        with _quiet_proxy_executor():
            inductor_ir.warning("%s is missing a c-shim implementation, using proxy executor as fallback",
                                "aten.foo.default")
            inductor_ir.warning("another warning")
        inductor_ir.warning("%s is missing a c-shim implementation, using proxy executor as fallback",
                            "aten.bar.default")
    finally:
        inductor_ir.removeHandler(lines)
    assert lines.lines == ["another warning",
                           "aten.bar.default is missing a c-shim implementation, using proxy executor as fallback"]


# -- the test run itself: a line per file, under xdist too; the session cache removed ----------

def test_a_test_run_prints_a_line_per_file_and_removes_its_cache(tmp_path):
    import shutil

    for helper in ("conftest.py", "default_share.py"):
        shutil.copy(os.path.join(REPO, "tests", helper), tmp_path / helper)
    (tmp_path / "test_one.py").write_text(textwrap.dedent("""
        import os
        def test_a():
            with open(os.environ["CACHE_PATH_FILE"], "w") as f:
                f.write(os.environ["EAGERC_CACHE_DIR"])
            assert os.path.isdir(os.environ["EAGERC_CACHE_DIR"])
        def test_b():
            pass
    """))
    (tmp_path / "test_two.py").write_text("import pytest\n@pytest.mark.skip\ndef test_c():\n    pass\n")
    told = tmp_path / "cache-path.txt"
    # pyproject's options (its file is not above tmp_path): the plugins it turns off cost
    # each of the three processes a second or more of imports.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadfile", "-p", "no:benchmark",
                           "-p", "no:hypothesispytest", "-p", "no:anyio", str(tmp_path)], cwd=tmp_path,
                          env={**os.environ, "CACHE_PATH_FILE": str(told)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "test_one.py: 2 passed in " in done.stdout, done.stdout
    assert "test_two.py: 1 skipped in " in done.stdout, done.stdout
    assert "(3/3 tests done)" in done.stdout
    cache = told.read_text()
    assert cache.startswith(tempfile.gettempdir()) and not os.path.exists(cache)


_LINALG_INV = """
import contextlib, sys, torch, eagerc
if sys.argv[1] == "unfiltered":
    import eagerc.compile.inductor_wrapper as wrapper
    wrapper._quiet_proxy_executor = contextlib.nullcontext
eagerc.enable("cpu")
torch.linalg.inv(torch.randn(4, 4) + 4 * torch.eye(4))
"""


@pytest.mark.slow  # two processes compile linalg_inv's kernel
@pytest.mark.parametrize("mode", ["filtered", "unfiltered"])
def test_no_proxy_executor_warning_reaches_a_user_of_enable_cpu(tmp_path, mode):
    done = subprocess.run([sys.executable, "-c", _LINALG_INV, mode], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "EAGERC_CACHE_DIR": str(tmp_path / "c")})
    assert done.returncode == 0, done.stderr[-3000:]
    # linalg_inv_ex calls an ATen kernel Inductor's C shim lacks: Inductor warns while
    # eagerc compiles it, unless eagerc filters the note (the unfiltered run shows it does).
    assert ("missing a c-shim implementation" in done.stderr) == (mode == "unfiltered"), done.stderr[-3000:]
