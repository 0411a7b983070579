"""README.md's Python code blocks run as written, each as a script in a fresh process (a
block that enables a device must not leak into the next), with the test session's kernel
cache; what a block promises to print is checked in its output.

What a block needs, that it is slow, or what it prints is said in an HTML comment on the
line right before its fence, so the rendered README shows only the code:

    <!-- test: needs cuda -->           an NVIDIA GPU that torch sees
    <!-- test: needs redis-server -->   redis-server on PATH
    <!-- test: needs ray -->            the ray package
    <!-- test: slow -->                 run with the slow tests (pytest -m slow)
    <!-- test: prints REGEX -->         its output (stdout and stderr) matches REGEX
                                        (re.search, multiline; one per directive)
    <!-- test: slow; needs ray -->      several, separated by ';'

A block without a comment runs in the default test run; where a need is missing the
block is skipped, the reason saying what would make it run. A block run as a script
shows nothing a REPL would have echoed, so a block may not end a line on a bare value
(``eagerc.stats()`` alone on a line): it prints it, or keeps it.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^(?:<!--\s*test:(?P<directives>[^>]*?)-->\n)?```python\n(?P<code>.*?)^```", re.S | re.M)


def blocks() -> list:
    """(line of the fence, directives, code) of each ```python block."""
    text = README.read_text()
    found = []
    for m in _BLOCK.finditer(text):
        fence = text.count("\n", 0, m.start("code"))  # the fence's line, 1-based
        directives = [d.strip() for d in (m.group("directives") or "").split(";") if d.strip()]
        found.append((fence, directives, m.group("code")))
    return found


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# What each `needs` word checks, and what to do when it is missing.
NEEDS = {
    "cuda": (_has_cuda, "needs a CUDA GPU that torch sees (run it on a GPU machine: tools/user_gpu_check.sh)"),
    "redis-server": (lambda: shutil.which("redis-server") is not None,
                     "needs redis-server on PATH (apt-get install redis-server, or tools/setup.sh as root)"),
    "ray": (lambda: importlib.util.find_spec("ray") is not None,
            "needs the ray package (pip install 'eagerc[ray]', or tools/setup.sh)"),
}


def needs(directives: list) -> list:
    return [d.split(None, 1)[1].strip() for d in directives if d.startswith("needs ")]


def prints(directives: list) -> list:
    return [d.split(None, 1)[1].strip() for d in directives if d.startswith("prints ")]


def bare_values(code: str) -> list:
    """Lines of top-level expressions whose value a script drops: a name, an attribute, a
    subscript, or a call of a function that only returns something (stats, summary)."""
    found = []
    for node in ast.parse(code).body:
        if not isinstance(node, ast.Expr):
            continue
        value = node.value
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("stats", "capture_stats", "summary"):
                found.append(node.lineno)
        elif isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
            found.append(node.lineno)
    return found


def _params() -> list:
    return [pytest.param(line, directives, code, id=f"README.md:{line}",
                         marks=[pytest.mark.slow] if "slow" in directives else [])
            for line, directives, code in blocks()]


def test_readme_has_python_blocks():
    assert len(blocks()) >= 4, "README's Python examples went missing"


def test_every_directive_is_known():
    for line, directives, _ in blocks():
        for d in directives:
            assert d == "slow" or d.startswith("prints ") or (
                d.startswith("needs ") and needs([d])[0] in NEEDS), (
                f"README.md:{line}: unknown '<!-- test: {d} -->' (known: slow, prints REGEX, "
                f"needs {'|'.join(NEEDS)})")
        for pattern in prints(directives):
            re.compile(pattern, re.M)


def test_blocks_print_what_they_show():
    """Run as a script, a line holding only `eagerc.stats()` shows nothing."""
    for line, _, code in blocks():
        assert not bare_values(code), (
            f"README.md:{line}: line(s) {bare_values(code)} of the block only compute a value, "
            "which a script drops: print it")


def test_a_block_that_drops_its_value_is_found():
    assert bare_values("import eagerc\neagerc.stats()\nx = 1\nx\n") == [2, 4]
    assert bare_values("print(eagerc.stats())\neagerc.disable('cpu')\n") == []


@pytest.mark.parametrize("line,directives,code", _params())
def test_readme_block_runs(line, directives, code, tmp_path):
    for word in needs(directives):
        available, why = NEEDS[word]
        if not available():
            pytest.skip(f"README.md:{line}: {why}")
    script = tmp_path / "block.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"README.md:{line} failed (exit {done.returncode}):\n{code}\n--- stderr ---\n"
                    f"{done.stderr[-4000:]}", pytrace=False)
    output = done.stdout + done.stderr
    for pattern in prints(directives):
        if not re.search(pattern, output, re.M):
            pytest.fail(f"README.md:{line} promises output matching {pattern!r}; it printed:\n"
                        f"{output[-4000:]}", pytrace=False)
