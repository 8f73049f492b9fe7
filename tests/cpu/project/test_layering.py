"""The package's layering, read from its import graph (``ast`` only, nothing is imported).

Three rules keep the layout true as code is added:
* imports go down the layers only, and an algorithm's home imports no other home;
* no import circle, counting imports made inside functions too (they only delay a circle);
* no underscore name, and no underscore module, is taken from another layer unit.

Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "cuprims"

# Low to high. A unit is a top-level module or package of cuprims, or an algorithm's home
# ("algorithms.<home>"); the shared modules of ``algorithms`` are the unit "algorithms".
LAYERS = (
    ("errors",),
    ("config", "enums", "_base"),
    ("_value_types", "types", "struct", "struct_values", "typing"),
    ("_runtime",),
    ("_cache",),
    ("_compile",),
    ("_operators", "op"),
    ("_codegen",),
    ("iterators",),
    ("_build",),
    ("algorithms",),
    ("algorithms.*",),
    ("coop",),
    ("_serialization", "_caching"),
    ("", "__main__"),
    ("dask",),
)


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for root, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = Path(root) / name
                rel = path.relative_to(package.parent).with_suffix("").parts
                found[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = path
    return found


def unit_of(module: str, homes: frozenset[str]) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "algorithms" and len(parts) > 1 and parts[1] in homes:
        return "algorithms." + parts[1]
    return parts[0]


def layer_of(unit: str) -> int:
    for level, names in enumerate(LAYERS):
        if unit in names or (unit.startswith("algorithms.") and "algorithms.*" in names):
            return level
    raise AssertionError(f"unit {unit!r} is in no layer: add it to LAYERS")


def imports_of(path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """(imported module, name taken from it or None, line) for each cuprims import."""
    tree = ast.parse(path.read_text())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "cuprims"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cuprims":
            assert node.level == 0, f"{path}:{node.lineno}: a relative import (write it absolute)"
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.append((full, None, node.lineno) if full in modules else (node.module, a.name, node.lineno))
    return found


def graph_problems(package: Path = PACKAGE) -> list[str]:
    modules = module_files(package)
    homes = frozenset(p.name for p in (package / "algorithms").iterdir() if (p / "__init__.py").exists())
    problems, edges = [], {}
    for module, path in sorted(modules.items()):
        unit = unit_of(module, homes)
        for target, name, line in imports_of(path, modules):
            where, what = f"{module}:{line}", target + (f".{name}" if name else "")
            tunit = unit_of(target, homes)
            edges.setdefault(module, set()).add(target)
            if layer_of(tunit) > layer_of(unit):
                problems.append(f"upward: {where} imports {what} ({unit or 'cuprims'} -> {tunit})")
            if unit.startswith("algorithms.") and tunit.startswith("algorithms.") and unit != tunit:
                problems.append(f"between homes: {where} imports {what}")
            inner = target.split(".")[2:] if tunit != "" else []
            if tunit != unit and ((name or "").startswith("_") and not name.startswith("__")
                                  or any(part.startswith("_") for part in inner)):
                problems.append(f"private: {where} takes {what} from another unit")
    problems += [f"circle: {' -> '.join(c)}" for c in circles(edges)]
    return problems


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
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
    return found


def test_the_package_keeps_its_layers():
    assert graph_problems() == []


def test_every_unit_has_a_layer():
    homes = frozenset(p.name for p in (PACKAGE / "algorithms").iterdir() if (p / "__init__.py").exists())
    for module in module_files():
        layer_of(unit_of(module, homes))


@pytest.fixture
def package_copy(tmp_path):
    import shutil

    copy = tmp_path / "cuprims"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("forged, expected", [
    # the runtime reaching up into the build stage
    ("_runtime/streams.py", "upward:"),
    # one algorithm's home using another's generator
    ("algorithms/scan/api.py", "between homes:"),
    # a private helper taken across units
    ("_build/build.py", "private:"),
    # a circle through a function-level import
    ("_runtime/devices.py", "circle:"),
])
def test_each_rule_catches_a_forged_violation(package_copy, forged, expected):
    line = {
        "upward:": "from cuprims._build.build import build_key\n",
        "between homes:": "from cuprims.algorithms.reduce.source import reduce_source\n",
        "private:": "from cuprims._runtime.pools import _pools\n",
        "circle:": "def _late():\n    from cuprims._runtime import streams\n",
    }[expected]
    path = package_copy / forged
    path.write_text(path.read_text() + "\n" + line)
    problems = graph_problems(package_copy)
    assert any(p.startswith(expected) for p in problems), problems
