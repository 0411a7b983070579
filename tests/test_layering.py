"""Imports go one way (docs/architecture.md, "Layers"):

- kernel_cache/ (storage) imports nothing from eagerc;
- eagerc's core (targets, the compile/cache service, the compiler, registration, stats)
  imports no feature;
- features (device, capture, warm, coverage) import core, never each other;
- no module below the top imports the package's API (what eagerc/__init__.py binds:
  `eagerc.enable`, `eagerc.stats`, ...); it imports the module that defines it;
- the C++ extension is the top-level module _eagerc: eagerc's modules import it directly
  (`import _eagerc as _C`), never as eagerc._C (the name eagerc/__init__ binds for users,
  which runs that __init__: the device's registration), and importing it imports no eagerc
  module;
- eagerc's modules import each other without a circle.

Every import counts, including those inside functions (lazy imports are still edges). The
import graph is tests/import_graph.py's (Python runs a package's __init__ before any of its
submodules, whatever the statement names).
"""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest
from import_graph import (EXTENSIONS, circles, extension_through_package, import_graph, package_api_uses,
                          package_sources)

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEATURES = ("device", "capture", "warm", "coverage")
# The public API and the command line sit above everything: they may import any layer.
TOP = {"eagerc", "eagerc.__main__", "eagerc._demo"}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: pathlib.Path) -> set[str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "kernel_cache":
        return "storage"
    if parts[0] != "eagerc":
        return "external"
    if module in TOP:
        return "top"
    if len(parts) > 1 and parts[1] in FEATURES:
        return f"feature:{parts[1]}"
    return "core"


SOURCES = sorted(p for d in ("eagerc", "kernel_cache") for p in (ROOT / d).rglob("*.py"))


def violations(path: pathlib.Path) -> list[str]:
    own = layer(module_name(path))
    bad = []
    for target in imports(path):
        other = layer(target)
        if own == "top" or other in ("external", own) or target == "eagerc":
            continue  # `from eagerc import x`: which names are imported from the package is
            # test_no_module_below_the_top_uses_the_package_api's check
        if other == "top":
            bad.append(target)  # nothing imports the API or the command line
        elif own == "storage":
            bad.append(target)
        elif other.startswith("feature"):
            bad.append(target)  # core -> feature, or feature -> another feature
    return sorted(bad)


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_imports_go_one_way(path):
    assert violations(path) == [], f"{module_name(path)} ({layer(module_name(path))}) imports against the layers"


def test_the_check_sees_a_violation(tmp_path, monkeypatch):
    fake = ROOT / "eagerc" / "cache.py"
    source = fake.read_text()
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self: source + "\nfrom eagerc.capture import api\n")
    assert violations(fake) == ["eagerc.capture", "eagerc.capture.api"]


def test_layers_are_what_the_architecture_says():
    assert layer("eagerc.cache") == layer("eagerc.compile.op") == layer("eagerc.targets") == "core"
    # The per-op mode (registration, the miss resolver, eager's check, background compiles)
    # and the refusal types are core: the features and the public API build on them.
    assert layer("eagerc.per_op.resolver") == layer("eagerc.per_op.registration") == "core"
    assert layer("eagerc.refusals") == "core"
    # The code generator objects are core: targets and the compiler ask them, features never
    # need to (the eagerc device's Inductor backend registers what they recognize).
    assert layer("eagerc.codegen") == layer("eagerc.codegen.cpp.generator") == layer("eagerc.codegen.triton.generator") == "core"
    assert layer("eagerc.device.inductor_backend") == "feature:device"
    assert layer("eagerc.capture.monitor") == "feature:capture"
    assert layer("kernel_cache.disk") == "storage"


EAGERC = package_sources("eagerc")
MODULES = set(EAGERC) | set(EXTENSIONS)
BELOW_TOP = sorted(set(EAGERC) - TOP)


@pytest.mark.parametrize("module", BELOW_TOP)
def test_no_module_below_the_top_uses_the_package_api(module):
    source, is_package = EAGERC[module]
    assert package_api_uses(module, source, is_package, MODULES) == [], (
        f"{module} uses what eagerc/__init__.py binds; import the module that defines it "
        "(e.g. eagerc.per_op.registration for enable, disable, stats)")


def test_eagerc_has_no_import_circle():
    assert circles(import_graph(EAGERC)) == []


# eagerc/__init__ binds eagerc._C to the extension; every other module imports _eagerc.
@pytest.mark.parametrize("module", sorted(set(EAGERC) - {"eagerc"}))
def test_no_module_reaches_the_extension_through_the_package(module):
    source, is_package = EAGERC[module]
    assert extension_through_package(module, source, is_package) == [], (
        f"{module} reaches the C++ extension as eagerc._C, which runs eagerc/__init__ "
        "(the device's registration) first; use `import _eagerc as _C`")


def test_the_extension_imports_without_the_package():
    # A fresh interpreter (no torch.backends plug-in, which may import eagerc with torch):
    # importing the extension, after torch as any torch extension, runs no eagerc module;
    # `import eagerc` then names that same module eagerc._C, loaded once.
    code = ("import importlib, sys\n"
            "import torch\n"
            "import _eagerc\n"
            "loaded = sorted(m for m in sys.modules if m == 'eagerc' or m.startswith('eagerc.'))\n"
            "assert loaded == [], loaded\n"
            "import eagerc\n"
            "from eagerc import _C\n"
            "assert eagerc._C is _C is _eagerc is importlib.import_module('eagerc._C')\n"
            "assert sys.modules['eagerc._C'] is sys.modules['_eagerc']\n")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]


def test_the_graph_checks_see_what_they_are_for():
    # A circle held open by an import inside a function; `import _eagerc` is an edge to the
    # extension alone, so a module the package's __init__ imports may import it.
    sources = {"eagerc": ("import _eagerc as _C\nfrom eagerc.b import f\n", True),
               "eagerc.a": ("import eagerc.b\n", False),
               "eagerc.b": ("import _eagerc as _C\ndef f():\n    from eagerc import a\n", False),
               "eagerc.c": ("import eagerc.a\n", False)}
    assert circles(import_graph(sources)) == [["eagerc.a", "eagerc.b"]]
    sources["eagerc.b"] = ("import _eagerc as _C\n", False)
    assert circles(import_graph(sources)) == []
    # The package API from below: a bare import and its attributes, or an imported name;
    # submodules (eagerc.device) are not the API, eagerc._C (bound by the __init__) is.
    modules = {"eagerc", "_eagerc", "eagerc.device", "eagerc.device.naming"}
    code = ("import eagerc\nimport eagerc.device\nfrom eagerc import _C, device\n"
            "def f():\n    from eagerc import enable\n    return eagerc.stats(), eagerc.device.NAME\n")
    assert package_api_uses("eagerc.x", code, False, modules) == [
        "line 1: import eagerc", "line 3: from eagerc import _C", "line 5: from eagerc import enable",
        "line 6: eagerc.stats"]
    # The extension through the package, in each spelling; `import _eagerc` is not.
    code = ("import _eagerc as _C\nimport eagerc._C\nfrom eagerc import _C, device\n"
            "def f():\n    from eagerc._C import MissAnswer\n    from .. import _C\n"
            "    return eagerc._C.MissAnswer, eagerc.device\n")
    assert extension_through_package("eagerc.per_op.x", code, False) == [
        "line 2: import eagerc._C", "line 3: from eagerc import _C",
        "line 5: from eagerc._C import MissAnswer", "line 6: from eagerc import _C", "line 7: eagerc._C"]
    assert package_api_uses("eagerc.x", "import eagerc.device.naming\nn = eagerc.device.naming.NAME\n",
                            False, modules) == []
