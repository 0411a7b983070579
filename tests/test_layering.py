"""Imports go one way (docs/architecture.md, "Layers"):

- kernel_cache/ (storage) imports nothing from eagerc;
- eagerc's core (targets, the compile/cache service, the compiler, registration, stats)
  imports no feature;
- features (device, capture, warm, coverage) import core, never each other.

Every import counts, including those inside functions (lazy imports are still edges).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

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
            continue  # `from eagerc import _C` names the package itself: neutral
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
