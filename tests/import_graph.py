"""eagerc's import graph, for the structure tests (test_layering, test_capture_structure,
test_codegen_rooms): which eagerc modules each module imports, and the circles among them.

Every import counts, including those inside functions: a lazy import that holds a circle
open is still a circle. `from a import b` is an edge to the module a.b where b is a module,
else to a. Importing a submodule runs its package's __init__ first, whatever the statement
names, so that is no edge of its own: the package node is reached by `import eagerc` or by
importing a name its __init__ binds. The compiled extension is the top-level module _eagerc
(CMakeLists.txt); eagerc._C is a name eagerc/__init__ binds to it, so reaching it that way
reaches the package."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Modules that are not Python files: the C++ extension (csrc/, built by CMake).
EXTENSIONS = ("_eagerc",)


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_sources(package: str = "eagerc", root: pathlib.Path = ROOT) -> dict[str, tuple[str, bool]]:
    """module -> (source, is_package) for every Python file of `package`."""
    return {module_name(p, root): (p.read_text(), p.name == "__init__.py")
            for p in sorted((root / package.replace(".", "/")).rglob("*.py"))}


def imported(module: str, source: str, is_package: bool, modules) -> list[tuple[str, str | None, int]]:
    """(module imported, name imported from it or None, line) for every import in `source`
    at any depth whose target is one of `modules`."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    found.append((target, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.append((f"{base}.{alias.name}", None, node.lineno))
                elif base in modules:
                    found.append((base, alias.name, node.lineno))
    return found


def import_graph(sources: dict[str, tuple[str, bool]], extensions=EXTENSIONS) -> dict[str, set[str]]:
    """module -> the modules of `sources` (and `extensions`) it imports."""
    modules = set(sources) | set(extensions)
    return {m: {target for target, _, _ in imported(m, source, is_package, modules)} - {m}
            for m, (source, is_package) in sources.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def package_api_uses(module: str, source: str, is_package: bool, modules, package: str = "eagerc") -> list[str]:
    """Where `source` uses what `package`'s __init__ binds (its public API) rather than one
    of its submodules: `import eagerc` on its own, `from eagerc import <not a module>`, and
    `eagerc.<not a module>` wherever the name `eagerc` is the package."""
    found = [f"line {line}: from {package} import {name}"
             for target, name, line in imported(module, source, is_package, modules)
             if target == package and name is not None]
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {package}" for a in node.names
                      if a.name == package and a.asname is None] + [
                f"line {node.lineno}: import {package} as {a.asname}" for a in node.names
                if a.name == package and a.asname]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == package and f"{package}.{node.attr}" not in modules):
            found.append(f"line {node.lineno}: {package}.{node.attr}")
    return sorted(set(found), key=lambda s: (int(s.split()[1].rstrip(":")), s))


def extension_through_package(module: str, source: str, is_package: bool, package: str = "eagerc",
                              alias: str = "_C") -> list[str]:
    """Where `source` reaches the extension by its name inside `package` (eagerc._C): `import
    eagerc._C`, `from eagerc import _C`, `from eagerc._C import ...` or `eagerc._C` wherever the
    name `eagerc` is the package. Each runs the package's __init__ first."""
    own = module if is_package else module.rpartition(".")[0]
    name = f"{package}.{alias}"
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name == name or a.name.startswith(name + ".")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = own.split(".")[: len(own.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base == name or base.startswith(name + "."):
                found.append(f"line {node.lineno}: from {base} import {', '.join(a.name for a in node.names)}")
            elif base == package and any(a.name == alias for a in node.names):
                found.append(f"line {node.lineno}: from {package} import {alias}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == package and node.attr == alias):
            found.append(f"line {node.lineno}: {name}")
    return sorted(set(found), key=lambda s: (int(s.split()[1].rstrip(":")), s))
