"""Each kind of generated code keeps to its room (docs/architecture.md, "The code
generators' rooms"):

- no module outside eagerc/codegen/ tests which kind of code it has (compares with, or keys
  a table by, a code generator's name: "cpp", "triton") or imports a kind's own modules
  (eagerc.codegen.cpp.*, eagerc.codegen.triton.*): where kinds differ, the code asks the
  code generator object (eagerc/codegen/base.py's hooks);
- the kind-neutral pipeline, eagerc/compile/, imports nothing of CUDA's or Triton's (nor of
  host C++'s own Inductor backend);
- eagerc/ has no import circle, counting imports inside functions (a lazy import that holds
  a circle open is still a circle).
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

from eagerc import codegen
from import_graph import circles, import_graph, package_sources

ROOT = pathlib.Path(__file__).resolve().parents[1]
EAGERC = ROOT / "eagerc"
CODEGEN = EAGERC / "codegen"
COMPILE = EAGERC / "compile"
KINDS = frozenset(c.name for c in codegen.ALL)
# What a kind-neutral compiler must not import: a module path with one of these parts.
_KIND_SPECIFIC_PART = re.compile(r"^(triton|cuda\w*|cpp\w*|\w*_cuda|\w*_gpu)$")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every module named by an import in `tree` (at any depth): `import a.b` names a.b,
    `from a import b` names a and a.b."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
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


def _names_a_kind(node) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_kind(e) for e in node.elts)
    return False


def kind_tests(source: str) -> list[str]:
    """Where `source` tests a code generator's kind: a comparison with a kind's name
    (``== "triton"``, ``in ("cpp", ...)``), a table keyed by one, ``getattr(x, "cpp")``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names_a_kind(n) for n in (node.left, *node.comparators)):
            found.append(node)
        elif isinstance(node, ast.Dict) and any(k is not None and _names_a_kind(k) for k in node.keys):
            found.append(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) > 1 and _names_a_kind(node.args[1])):
            found.append(node)
    return [f"line {n.lineno}: {ast.unparse(n)[:100]}" for n in found]


def kind_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """The modules of one kind's room that `source` imports."""
    rooms = tuple(f"eagerc.codegen.{kind}" for kind in KINDS)
    return sorted(m for m in imported_modules(ast.parse(source), module, is_package)
                  if m in rooms or m.startswith(tuple(f"{r}." for r in rooms)))


def kind_specific_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports of CUDA's, Triton's or host C++'s own modules (torch.cuda, triton,
    torch._inductor.codegen.cpp, eagerc.codegen.triton...)."""
    return sorted(m for m in imported_modules(ast.parse(source), module, is_package)
                  if any(_KIND_SPECIFIC_PART.match(part) for part in m.split(".")))


def _outside(folder: pathlib.Path):
    return sorted(p for p in EAGERC.rglob("*.py") if folder not in p.parents)


OUTSIDE_CODEGEN = _outside(CODEGEN)
COMPILER = sorted(COMPILE.rglob("*.py"))


@pytest.mark.parametrize("path", OUTSIDE_CODEGEN, ids=[module_name(p) for p in OUTSIDE_CODEGEN])
def test_no_kind_test_outside_codegen(path):
    source = path.read_text()
    name = module_name(path)
    assert kind_tests(source) == [], f"{name} tests a code generator's kind: ask its code generator object"
    assert kind_imports(source, name, path.name == "__init__.py") == [], \
        f"{name} imports a code generator's own modules: ask its code generator object"


@pytest.mark.parametrize("path", COMPILER, ids=[module_name(p) for p in COMPILER])
def test_the_compiler_imports_nothing_of_one_kind(path):
    assert kind_specific_imports(path.read_text(), module_name(path), path.name == "__init__.py") == []


# -- import circles ---------------------------------------------------------------------

def test_the_compiler_and_code_generators_are_in_no_import_circle():
    # eagerc-wide: tests/test_layering.py; this names the rooms this file is about.
    graph = import_graph(package_sources())
    ours = ("eagerc.compile", "eagerc.codegen")
    touching = [c for c in circles(graph) if any(m == r or m.startswith(f"{r}.") for m in c for r in ours)]
    assert touching == []


# -- the checks themselves: each finds what it is for -----------------------------------

def test_kind_tests_finds_what_the_per_op_rules_did():
    # eagerc/compile/per_op_patches.py (before the code generators' op_patches) chose the
    # eval batch norm's settings by the kind's name.
    source = ("def patches_for(op_qualname, args, codegen_name):\n"
              "    if codegen_name == \"triton\" and is_eval_batch_norm(op_qualname, args):\n"
              "        return dict(EVAL_BATCH_NORM_PATCHES)\n"
              "    return {}\n")
    assert kind_tests(source) == ['line 2: codegen_name == \'triton\'']
    assert len(kind_tests("HEADERS = {'cpp': '', 'triton': CUDA}\nx = kind in ('cpp',)\n"
                          "y = getattr(data, 'triton', None)\n")) == 3
    assert kind_tests("memory = 'cuda' if gpu else 'cpu'\nok = device.type == 'cpu'\n") == []


def test_kind_imports_finds_a_rooms_module():
    assert kind_imports("from eagerc.codegen.triton import plan_build\n", "eagerc.coverage.classify") == [
        "eagerc.codegen.triton", "eagerc.codegen.triton.plan_build"]
    assert kind_imports("def f():\n    from eagerc.codegen.cpp.glue_prelude import slim_build\n", "eagerc.x") == [
        "eagerc.codegen.cpp.glue_prelude", "eagerc.codegen.cpp.glue_prelude.slim_build"]
    assert kind_imports("from eagerc import codegen\nfrom eagerc.codegen import CPP\n", "eagerc.x") == []


def test_kind_specific_imports_finds_cuda_and_triton():
    source = ("import triton\nimport torch.cuda\n"
              "def f():\n    from torch._inductor.codegen.triton import TritonScheduling\n"
              "    from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu\n")
    assert kind_specific_imports(source, "eagerc.compile.x") == [
        "torch._inductor.codegen.cpp_wrapper_gpu", "torch._inductor.codegen.cpp_wrapper_gpu.CppWrapperGpu",
        "torch._inductor.codegen.triton", "torch._inductor.codegen.triton.TritonScheduling", "torch.cuda", "triton"]
    assert kind_specific_imports("import torch\nfrom torch._inductor import config\n", "eagerc.compile.x") == []
