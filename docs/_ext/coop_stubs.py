"""``.. coop-style2::``: the reference of cuprims.coop's single-phase calls, read from source.

``coop.load``, ``coop.this_block``, ``coop.ThreadData`` and the other Style 2 names are
defined in modules that import numba-cuda (their objects are numba stubs), so autodoc,
which imports what it documents, would import numba-cuda and CUDA's libraries into the
documentation build. This directive reads each name's signature and docstring from the
source files with :mod:`ast` instead: nothing is imported but ``cuprims.coop`` itself
(which imports neither), and the text is the docstring the code carries.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

# where each Style 2 name is defined (cuprims.coop._extension.names() imports them)
MODULES = ("_style2/groups.py", "_style2/thread_data.py", "_style2/calls.py", "_style2/calls_movement.py")


def _stubs(package: Path) -> dict[str, tuple[str, str, Path]]:
    """name -> (signature, docstring, file) of every function decorated ``@Stub``."""
    found: dict[str, tuple[str, str, Path]] = {}
    for module in MODULES:
        path = package / module
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "Stub" for d in node.decorator_list):
                found[node.name] = (ast.unparse(node.args), ast.get_docstring(node) or "", path)
    return found


class CoopStyle2(SphinxDirective):
    """Every name of ``cuprims.coop._extension._NAMES``, in that order, as a
    ``py:function`` of module ``cuprims.coop`` with its docstring."""

    has_content = False

    def run(self) -> list:
        from cuprims.coop._extension import _NAMES   # imports neither numba nor CUDA

        spec = importlib.util.find_spec("cuprims.coop")
        package = Path(spec.origin).parent
        stubs = _stubs(package)
        missing = [name for name in _NAMES if name not in stubs]
        if missing:
            raise self.error(f"coop-style2: no @Stub definition found for {missing} in {MODULES}")
        lines: list[str] = []
        for name in _NAMES:
            signature, doc, path = stubs[name]
            self.env.note_dependency(str(path))
            lines.append(f".. py:function:: {name}({signature})")
            lines.append("   :module: cuprims.coop")
            lines.append("")
            lines.extend(f"   {line}" if line else "" for line in doc.splitlines())
            lines.append("")
        holder = nodes.Element()
        holder.document = self.state.document
        self.state.nested_parse(StringList(lines, source="coop-style2"), self.content_offset, holder)
        return holder.children


def setup(app) -> dict:
    app.add_directive("coop-style2", CoopStyle2)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
