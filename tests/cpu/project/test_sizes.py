"""Size limits on the package's sources (``ast`` only, nothing is imported): no module over
400 lines and no function over 80, so that each module keeps to one job a reader can hold
at once, and each function to one step.

A function that is one generated-source template (a single C++ text with a few lines of
set-up) may pass the function limit by name, in :data:`TEMPLATE_FUNCTIONS`: cutting one
template into pieces scatters a C++ text a reader wants to see whole.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "cuprims"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

# "path/relative/to/src/cuprims.py:qualified.name" -> why it is one template. Empty: every
# generator keeps to the limit (helpers build the parts of its text).
TEMPLATE_FUNCTIONS: dict[str, str] = {}


# a listed function must be mostly its template: one string expression over this share of its lines
TEMPLATE_SHARE = 0.75


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + node.name
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from _functions(node, name + ".")
        else:
            yield from _functions(node, prefix)


def _span(node: ast.AST) -> int:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def _modules(package: Path):
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            text = path.read_text(encoding="utf-8")
            yield path.relative_to(package).as_posix(), text


def long_modules(package: Path = PACKAGE) -> list[str]:
    """``path: lines`` of each module over :data:`MAX_MODULE_LINES`."""
    return [f"{rel}: {len(text.splitlines())}" for rel, text in _modules(package)
            if len(text.splitlines()) > MAX_MODULE_LINES]


def long_functions(package: Path = PACKAGE, allowed: dict[str, str] | None = None) -> list[str]:
    """``path:name: lines`` of each function over :data:`MAX_FUNCTION_LINES` not allowed by name."""
    allowed = TEMPLATE_FUNCTIONS if allowed is None else allowed
    found = []
    for rel, text in _modules(package):
        for name, node in _functions(ast.parse(text)):
            if _span(node) > MAX_FUNCTION_LINES and f"{rel}:{name}" not in allowed:
                found.append(f"{rel}:{name}: {_span(node)}")
    return found


def _is_string_expr(node: ast.AST) -> bool:
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (
        _is_string_expr(node.left) or _is_string_expr(node.right))


def _template_share(node: ast.AST) -> float:
    """The share of the function's lines its longest string expression spans."""
    longest = max((n.end_lineno - n.lineno + 1 for n in ast.walk(node) if _is_string_expr(n)), default=0)
    return longest / _span(node)


def test_no_module_is_over_the_limit():
    assert long_modules() == []


def test_no_function_is_over_the_limit():
    assert long_functions() == []


def allowance_problems(allowed: dict[str, str], package: Path = PACKAGE) -> list[str]:
    """Entries of ``allowed`` naming no function, one within the limit, or one that is not
    mostly one string."""
    problems = []
    for entry in sorted(allowed):
        rel, name = entry.split(":")
        path = package / rel
        functions = dict(_functions(ast.parse(path.read_text(encoding="utf-8")))) if path.exists() else {}
        node = functions.get(name)
        if node is None:
            problems.append(f"{entry}: no such function")
        elif _span(node) <= MAX_FUNCTION_LINES:
            problems.append(f"{entry}: within the limit, needs no exception")
        elif _template_share(node) < TEMPLATE_SHARE:
            problems.append(f"{entry}: not one template")
    return problems


def test_each_allowed_function_is_a_long_template():
    assert allowance_problems(TEMPLATE_FUNCTIONS) == []


def test_the_checks_catch_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n")
    (package / "sub" / "long.py").write_text("\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES + 1)) + "\n")
    body = "".join(f"    y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "funcs.py").write_text("class C:\n    def method(self):\n" + body.replace("    ", "        ")
                                      + "\n\ndef fits():\n    pass\n\n\ndef template():\n    return (\n"
                                      + "".join(f'        "line {i}\\n"\n' for i in range(MAX_FUNCTION_LINES))
                                      + "    )\n")
    assert long_modules(package) == [f"sub/long.py: {MAX_MODULE_LINES + 1}"]
    assert long_functions(package) == [f"funcs.py:C.method: {MAX_FUNCTION_LINES + 1}",
                                       f"funcs.py:template: {MAX_FUNCTION_LINES + 3}"]
    allowed = {"funcs.py:template": "one C++ text"}
    assert long_functions(package, allowed) == [f"funcs.py:C.method: {MAX_FUNCTION_LINES + 1}"]
    assert allowance_problems(allowed, package) == []
    assert allowance_problems({"funcs.py:C.method": "", "funcs.py:fits": "", "funcs.py:gone": ""}, package) == [
        "funcs.py:C.method: not one template", "funcs.py:fits: within the limit, needs no exception",
        "funcs.py:gone: no such function"]
