"""The documentation's sources against the code, without building them (scripts/docs builds
the site with Sphinx, warnings as errors): every public name has an entry in the API
reference, and every file the pages include exists."""

from __future__ import annotations

import re
from pathlib import Path

import cuprims

DOCS = Path(__file__).resolve().parents[2] / "docs"

# ``.. autofunction:: reduce_into``, ``.. autoclass:: cuprims.coop.block.PrefixCallback()``,
# ``.. py:data:: settings``: the directive and the name it documents
_DIRECTIVE = re.compile(r"^\s*\.\. (auto\w+|py:\w+):: +([\w.]+)", re.MULTILINE)
_INCLUDE = re.compile(r"^\s*\.\. literalinclude:: +(\S+)", re.MULTILINE)


def _documented() -> set[str]:
    """Every name an API page documents, as written and without the ``cuprims.`` prefix."""
    names: set[str] = set()
    for page in (DOCS / "api").glob("*.rst"):
        for _, name in _DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            names.add(name)
            names.add(name.removeprefix("cuprims."))
    return names


def test_every_public_name_is_in_the_api_reference():
    documented = _documented()
    missing = [name for name in cuprims.__all__ if name not in documented]
    assert not missing, f"names of cuprims.__all__ without an entry in docs/api/: {missing}"


def test_every_included_file_exists():
    pages = sorted(DOCS.rglob("*.rst"))
    assert pages, DOCS
    included = []
    for page in pages:
        for target in _INCLUDE.findall(page.read_text(encoding="utf-8")):
            included.append((page, (page.parent / target).resolve()))
    assert len(included) >= 10, included          # the guide shows the example scripts
    missing = [f"{page.relative_to(DOCS)}: {path}" for page, path in included if not path.is_file()]
    assert not missing, missing


def test_every_example_script_is_shown():
    """Each script of examples/algorithms/ appears in a page (it is what the guide shows)."""
    shown = {path.name for page in DOCS.rglob("*.rst")
             for path in (Path(t) for t in _INCLUDE.findall(page.read_text(encoding="utf-8")))}
    scripts = sorted((DOCS.parent / "examples" / "algorithms").glob("*.py"))
    assert scripts
    assert not [s.name for s in scripts if s.name not in shown]
