"""The shape of eagerc/capture/ (docs/capture_internals.md, "Files"):

- its modules import each other without a circle, counting imports inside functions (a lazy
  import that holds a circle open is still a circle);
- a captured function's state (`Captured`'s attributes) is assigned in captured.py only: the
  jobs a call runs (monitor_run, partial_capture, value_misses) return what they decided and
  `Captured` applies it;
- counters go through the stats object (capture_stats.py), never indexed as a dict;
- no module imports another's private (`_name`) names: a name two modules share is public,
  or the code lives in the one module that uses it.
"""
from __future__ import annotations

import ast
import pathlib

from import_graph import circles

ROOT = pathlib.Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "eagerc" / "capture"
PACKAGE = "eagerc.capture"
# Names that hold a Captured in the modules around it: the parameter the jobs take, and
# what a Captured constructor call is bound to (see captured_names).
CAPTURED_PARAMETERS = {"cap", "captured"}


def module_name(path: pathlib.Path) -> str:
    return PACKAGE if path.name == "__init__.py" else f"{PACKAGE}.{path.stem}"


def sources(folder: pathlib.Path = CAPTURE) -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(folder.glob("*.py"))}


def imported(module: str, tree: ast.Module, modules) -> list[tuple[str, str | None]]:
    """(capture module imported, name imported from it or None) for every import in `tree`,
    at any depth; only targets inside the package."""
    package = module if module == PACKAGE else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.append((f"{base}.{alias.name}", None))
                elif base in modules:
                    found.append((base, alias.name))
    return found


def import_graph(trees) -> dict[str, set[str]]:
    return {m: {target for target, _ in imported(m, t, trees) if target != m}
            for m, t in trees.items()}


def captured_names(function: ast.AST) -> set[str]:
    """Names in `function` that hold a Captured: its parameters named like one, and names
    bound to `Captured(...)` or `type(<such a name>)(...)`."""
    names = {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)} & CAPTURED_PARAMETERS
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            made = node.value.func
            if (isinstance(made, ast.Name) and made.id == "Captured") or (
                    isinstance(made, ast.Call) and isinstance(made.func, ast.Name)
                    and made.func.id == "type"):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def root_name(target: ast.AST) -> str | None:
    """`cap` of `cap.stats["x"]`, `cap.compiler.eager_autograd`; None for a plain name."""
    if not isinstance(target, (ast.Attribute, ast.Subscript)):
        return None
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def captured_writes(tree: ast.Module) -> list[str]:
    """`cap.x = ...`, `cap.x[k] += 1`, `del cap.x` on a Captured, as source lines."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        names = captured_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            else:
                continue
            for target in targets:
                for part in ast.walk(target):
                    if root_name(part) in names:
                        found.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}")
                        break
    return sorted(set(found))


def stats_indexed(tree: ast.Module) -> list[str]:
    """`....stats[...]` or `stats[...]`: a counter bumped as a dict key."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            v = node.value
            if (isinstance(v, ast.Attribute) and v.attr == "stats") or (
                    isinstance(v, ast.Name) and v.id == "stats"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def private_imports(trees) -> list[str]:
    """`from .x import _name` and `x._name` (x a capture module) across capture modules."""
    found = []
    for module, tree in trees.items():
        aliases = {}
        for target, name in imported(module, tree, trees):
            if name is not None and name.startswith("_") and not name.startswith("__"):
                found.append(f"{module} imports {target}.{name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    full = f"{PACKAGE}.{alias.name}"
                    if node.level == 1 and node.module is None and full in trees:
                        aliases[alias.asname or alias.name] = full
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                found.append(f"{module} uses {aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_capture_has_no_import_circle():
    assert circles(import_graph(sources())) == []


def test_only_captured_py_assigns_a_captured_functions_state():
    writes = {m: w for m, t in sources().items() if m != f"{PACKAGE}.captured"
              for w in [captured_writes(t)] if w}
    assert writes == {}


def test_counters_go_through_the_stats_object():
    indexed = {m: s for m, t in sources().items() for s in [stats_indexed(t)] if s}
    assert indexed == {}


def test_no_private_names_cross_capture_modules():
    assert private_imports(sources()) == []


# The checks themselves: each finds what it is for.

def test_cycles_finds_a_circle_and_only_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_import_graph_counts_imports_inside_functions():
    tree = ast.parse("def f():\n    from .monitor import Monitor\n")
    trees = {f"{PACKAGE}.monitor_run": tree, f"{PACKAGE}.monitor": ast.parse("")}
    assert import_graph(trees)[f"{PACKAGE}.monitor_run"] == {f"{PACKAGE}.monitor"}


def test_captured_writes_finds_a_job_writing_captured_state():
    code = ("def run(cap, args):\n"
            "    cap.lift_after = None\n"
            "    cap.stats['misses'] += 1\n"
            "    cap.compiler.eager_autograd = True\n"
            "    mon.speculate = cap.speculate\n"
            "def children(cap, fn):\n"
            "    child = type(cap)(fn, None, None)\n"
            "    child.split = False\n")
    assert [w.split(":")[0] for w in captured_writes(ast.parse(code))] == [
        "line 2", "line 3", "line 4", "line 8"]


def test_stats_indexed_and_private_imports_find_their_pattern():
    assert stats_indexed(ast.parse("cap.stats['hits'] += 1")) == ["line 1: cap.stats['hits']"]
    trees = {f"{PACKAGE}.a": ast.parse("from .b import _x, y\nfrom . import b\nb._z\n"),
             f"{PACKAGE}.b": ast.parse("")}
    assert private_imports(trees) == [f"{PACKAGE}.a imports {PACKAGE}.b._x",
                                      f"{PACKAGE}.a uses {PACKAGE}.b._z"]
