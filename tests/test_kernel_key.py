"""The key of a compiled kernel (eagerc/kernel_key.py): one table of named components, each
changing the key, each in the DEBUG log, and none defined anywhere else."""
from __future__ import annotations

import ast
import logging
import os
import pathlib
import re

import pytest
import torch

import eagerc
from eagerc import _C, kernel_key, targets
from eagerc.codegen.cpp.generator import CPP
from eagerc.kernel_key import COMPONENTS, CacheKey

ROOT = pathlib.Path(__file__).resolve().parents[1]
CPU = targets.for_device("cpu")


def key(**changes) -> CacheKey:
    fields = {"kind": "op", "target": CPU, "name": "aten::abs", "signature": b"sig"} | changes
    return CacheKey(**fields)


def both(k: CacheKey) -> tuple:
    return k.namespace().digest(), k.entry_key()


def test_components_are_named_once_with_source_and_reason():
    names = [c.name for c in COMPONENTS]
    assert len(names) == len(set(names))
    for c in COMPONENTS:
        assert c.part in ("namespace", "entry"), c
        assert c.source and c.why, c
    assert names[:1] == ["format"]
    assert [c.name for c in COMPONENTS if c.part == "entry"] == ["kind", "device", "name", "signature"]


def test_same_key():
    assert both(key()) == both(key())


def _new_device_target(monkeypatch):
    monkeypatch.setenv("EAGERC_ALIAS_FALLBACK", "0")
    device = targets.for_device("eagerc")
    assert not device.native_kernels
    return device


# One way to change each component's value, by the component's name.
def _change_format(monkeypatch):
    monkeypatch.setattr(kernel_key, "FORMAT_VERSION", kernel_key.FORMAT_VERSION + 1)


def _change_signature_layout(monkeypatch):
    version, parts = kernel_key.signature_layout()
    monkeypatch.setattr(kernel_key, "signature_layout", lambda: (version + 1, parts))


def _change_torch(monkeypatch):
    monkeypatch.setattr(torch, "__version__", torch.__version__ + "+other")


def _change_eagerc(monkeypatch):
    import eagerc._version

    monkeypatch.setattr(eagerc._version, "__version__", eagerc._version.__version__ + "+other")


def _change_arch(monkeypatch):
    monkeypatch.setattr(type(CPP), "arch", lambda self: "cpu-other-isa")


def _change_inductor_env(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")


def _change_inductor_config(monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config.cpp, "simdlen", 8)


def _change_codegen(monkeypatch):
    monkeypatch.setattr(type(CPP), "build_recipe", CPP.build_recipe + ":other")


def _change_known_wrong(monkeypatch):
    monkeypatch.setattr(kernel_key, "KNOWN_WRONG_VERSION", kernel_key.KNOWN_WRONG_VERSION + "+")


CHANGES = {
    "format": _change_format,
    "signature_layout": _change_signature_layout,
    "torch": _change_torch,
    "eagerc": _change_eagerc,
    "arch": _change_arch,
    "inductor_env": _change_inductor_env,
    "inductor_config": _change_inductor_config,
    "codegen": _change_codegen,
    "known_wrong": _change_known_wrong,
    "kind": lambda m: {"kind": "graph"},
    "device": lambda m: {"target": targets.for_device("eagerc")},
    "name": lambda m: {"name": "aten::neg"},
    "signature": lambda m: {"signature": b"other"},
}


def test_every_component_has_a_change_below():
    assert set(CHANGES) | {"accelerator_decompositions"} == {c.name for c in COMPONENTS}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_different_key_per_component(name, monkeypatch):
    before = both(key())
    fields = CHANGES[name](monkeypatch) or {}
    after = both(key(**fields))
    part = next(c.part for c in COMPONENTS if c.name == name)
    changed = after[0] != before[0] if part == "namespace" else after[1] != before[1]
    assert changed, f"changing {name} left the key as it was"
    monkeypatch.undo()
    assert both(key()) == before


def test_every_codegen_entry_changes_the_key(monkeypatch):
    entries = {name for name in key().namespace_components() if name.startswith("codegen.")}
    assert {"codegen.build_recipe", "codegen.op_patch_rules"} <= entries
    for entry in entries:
        before = key().namespace().digest()
        field = entry.partition(".")[2]
        if field in ("build_recipe", "op_patch_rules"):
            monkeypatch.setattr(type(CPP), field, (getattr(CPP, field), "other"))
        else:
            settings = CPP.compiler_settings()
            monkeypatch.setattr(type(CPP), "compiler_settings", lambda self: {**settings, field: "other"})
        assert key().namespace().digest() != before, entry
        monkeypatch.undo()


def test_accelerator_decompositions_are_keyed_where_they_are_used(monkeypatch):
    assert "accelerator_decompositions" not in key().namespace_components()
    device = _new_device_target(monkeypatch)
    parts = key(target=device).namespace_components()
    assert parts["accelerator_decompositions"] == kernel_key.ACCELERATOR_DECOMPOSITIONS_VERSION
    before = key(target=device).namespace().digest()
    monkeypatch.setattr(kernel_key, "ACCELERATOR_DECOMPOSITIONS_VERSION", "other")
    assert key(target=device).namespace().digest() != before


def test_graph_signature_keys_code_and_inputs():
    import torch.fx

    def f(x):
        return x + 1

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(3, 4)
    first = kernel_key.graph_signature(gm, [x], [[]])
    assert first == kernel_key.graph_signature(gm, [torch.randn(3, 4)], [[]])
    assert first != kernel_key.graph_signature(gm, [torch.randn(3, 5)], [[]])
    assert first != kernel_key.graph_signature(gm, [x.t()], [[]])
    assert kernel_key.graph_signature(gm, [x], [[1]]) == kernel_key.graph_signature(gm, [torch.randn(3, 9)], [[1]])
    assert first != kernel_key.graph_signature(torch.fx.symbolic_trace(lambda x: x * 2), [x], [[]])


def _logged_key(records) -> str:
    lines = [r.getMessage() for r in records if r.name == "eagerc.key"]
    assert lines, "no DEBUG record of the key"
    return lines[0]


def test_debug_log_names_every_component(fresh_cache, caplog):
    with caplog.at_level(logging.DEBUG, logger="eagerc.key"), eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(4, 4))
    text = _logged_key(caplog.records)
    listed = set(re.findall(r"^  (\S+) = ", text, re.M))
    expected = set(key().namespace_components()) | {c.name for c in COMPONENTS if c.part == "entry"}
    assert listed == expected
    for c in COMPONENTS:
        assert any(name.partition(".")[0] == c.name for name in listed) or c.name == "accelerator_decompositions"
    # The C++ signature's parts, by the names C++ gives them.
    _, parts = _C._signature_layout()
    for name, _, _ in parts:
        assert name in text, name


def test_debug_log_once_per_miss(fresh_cache, caplog):
    with caplog.at_level(logging.DEBUG, logger="eagerc.key"), eagerc.enabled("cpu", ops=["aten::neg"]):
        torch.neg(torch.randn(6))
    assert len([r for r in caplog.records if r.name == "eagerc.key"]) == 1


# ----------------------------------------------------------------- the C++ signature

LAYOUT_HEADER = ROOT / "csrc" / "signature_layout.h"
SIGNATURE_SOURCE = ROOT / "csrc" / "signature.cpp"


def _declared_tags() -> dict:
    text = LAYOUT_HEADER.read_text()
    return dict(re.findall(r"constexpr char (k\w+) = '(.)';", text))


def test_python_reads_the_signature_layout_from_cpp():
    version, parts = _C._signature_layout()
    declared = int(re.search(r"kSignatureLayoutVersion = (\d+);", LAYOUT_HEADER.read_text()).group(1))
    assert version == declared == kernel_key.signature_layout()[0]
    assert key().namespace_components()["signature_layout"] == str(version)
    assert len({name for name, _, _ in parts}) == len(parts)


def test_every_tag_cpp_writes_is_a_named_part():
    """The writers put no byte literal into a key: each tag is declared in
    signature_layout.h, and each declared tag is in a named part's bytes."""
    source = SIGNATURE_SOURCE.read_text()
    assert not re.search(r"put_(?:byte|list_header)\(key, '", source), "a tag written as a literal"
    used = set(re.findall(r"tag::(k\w+)", source))
    declared = _declared_tags()
    assert used <= set(declared), used - set(declared)
    assert used == set(declared), f"declared but never written: {set(declared) - used}"
    _, parts = _C._signature_layout()
    described = " ".join(part_bytes for _, part_bytes, _ in parts)
    for name, char in declared.items():
        assert f"'{char}'" in described, f"tag {name} ('{char}') is in no named part"


def test_typed_signatures_have_no_writer_of_their_own():
    """The convolution, mm and addmm signatures write through the shared writers only."""
    source = SIGNATURE_SOURCE.read_text()
    for function in ("compute_convolution_signature", "compute_mm_signature", "compute_addmm_signature"):
        body = source[source.index(f"void {function}("):]
        body = body[:body.index("\n}\n")]
        assert "key.raw(" not in body and "put_int(key" not in body, function


# ------------------------------------------------------------- one place for the key

KEY_CONSTANT = re.compile(r"(^|_)VERSION$|RECIPE")
# Constants of that shape that are no part of a kernel's key, with why.
NOT_KEY_PARTS = {
    # The launch plan's text format, checked by its C++ reader when a plan loads; the
    # launcher itself is in the Triton code generator's build recipe.
    ("eagerc/codegen/triton/launch_plan.py", "VERSION"),
    # The coverage report's JSON schema (a report file, not a kernel).
    ("eagerc/coverage/report_json.py", "SCHEMA_VERSION"),
}


def _module_constants(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in tree.body:
        targets_ = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets_:
            if isinstance(t, ast.Name):
                yield t.id


def test_key_constants_are_defined_only_in_the_key_module():
    found = []
    for path in sorted((ROOT / "eagerc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "eagerc/kernel_key.py":
            continue
        for name in _module_constants(path):
            if KEY_CONSTANT.search(name) and (rel, name) not in NOT_KEY_PARTS:
                found.append(f"{rel}: {name}")
    assert found == [], "key components defined outside eagerc/kernel_key.py"


def test_only_the_key_module_builds_a_namespace():
    found = []
    for path in sorted((ROOT / "eagerc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel != "eagerc/kernel_key.py" and re.search(r"\bNamespace\(", path.read_text()):
            found.append(rel)
    assert found == []


def test_the_check_finds_a_constant(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("BUILD_RECIPE = 'x'\nVERSION = 1\nclass C:\n    VERSION = 2\nPLAIN = 3\n")
    assert [n for n in _module_constants(sample) if KEY_CONSTANT.search(n)] == ["BUILD_RECIPE", "VERSION"]


def test_every_home_gap_op_is_named_by_the_keys_prefix():
    # The key answers "traced for a home gap?" by name first (no decompositions import on
    # a disk load): every op for_home_gaps can name must carry the prefix.
    from eagerc.compile.accelerator import rnn_cells
    from eagerc.compile.accelerator.decompositions import for_home_gaps

    names = [op.name() for op in rnn_cells.table()]
    assert names and all(n.startswith(kernel_key.HOME_GAP_PREFIX) for n in names), names
    assert all(op.name().startswith(kernel_key.HOME_GAP_PREFIX) for op in for_home_gaps("cpu"))


# ----------------------------------------------------------------- the namespace's cost

def _fake_compiler(folder: pathlib.Path, name: str) -> pathlib.Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n# {name} of {folder}\n")
    path.chmod(0o755)
    return path


def test_each_input_of_the_namespace_changes_it_within_the_process(monkeypatch, tmp_path):
    # The namespace's environment-read parts are worked out once and kept while the
    # environment is unchanged: a change of any variable they read must still reach the
    # key of the next lookup in the same process.
    monkeypatch.delenv("CXX", raising=False)
    base = key().namespace().digest()
    assert key().namespace().digest() == base  # now from what is kept
    changes = {
        "CXX": str(_fake_compiler(tmp_path / "cxx", "my-g++")),
        # Another g++ found first on the PATH: a different compiler file.
        "PATH": f"{_fake_compiler(tmp_path / 'bin', 'g++').parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CXXFLAGS": "-O0", "CPPFLAGS": "-DX=1", "LDFLAGS": "-lm",
        "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
    }
    from eagerc.codegen.cpp import clang_units, one_unit

    if clang_units.compiler() is not None:  # whether one clang process builds the library
        changes[one_unit.ENV] = "0" if os.environ.get(one_unit.ENV) != "0" else "1"
    for name, value in changes.items():
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert key().namespace().digest() != base, name
        assert key().namespace().digest() == base, name
    # A variable nothing in the key reads leaves the key as it was.
    monkeypatch.setenv("EAGERC_UNRELATED_TO_THE_KEY", "1")
    assert key().namespace().digest() == base


def test_a_device_target_follows_the_alias_fallback_variable(monkeypatch):
    monkeypatch.delenv("EAGERC_ALIAS_FALLBACK", raising=False)
    device = targets.for_device("eagerc")
    with_aliases = key(target=device).namespace().digest()
    monkeypatch.setenv("EAGERC_ALIAS_FALLBACK", "0")
    assert key(target=device).namespace().digest() != with_aliases


def test_a_kept_namespace_reads_no_file(monkeypatch):
    # Every store lookup builds its key's namespace: once known, no shutil.which, stat or
    # realpath of the compilers (they were half of each miss's lookup).
    import glob
    import os.path
    import shutil

    calls = []

    def counted(module, name):
        real = getattr(module, name)

        def call(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, call)

    k = key()
    k.namespace_and_digest()
    for module, name in ((shutil, "which"), (os, "stat"), (os, "lstat"), (os, "access"),
                         (os.path, "realpath"), (os.path, "exists"), (os, "listdir"), (glob, "glob")):
        counted(module, name)
    for _ in range(3):
        k.namespace_and_digest()
        k.entry_key()
    assert calls == []
    # The count sees the compiler being looked at where the environment changes.
    monkeypatch.setenv("PATH", os.environ.get("PATH", "") + os.pathsep + "/nonexistent-for-the-key")
    k.namespace_and_digest()
    assert "which" in calls


def test_the_namespace_is_built_once_per_set_of_values():
    a, b = key().namespace_and_digest(), key(name="aten::neg").namespace_and_digest()
    assert a[0] is b[0] and a[1] == b[1] == a[0].digest()
