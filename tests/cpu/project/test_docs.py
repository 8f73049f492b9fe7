"""The documentation's sources against the code, without building them (scripts/docs builds
the site with Sphinx, warnings as errors): every public name has an entry in the API
reference, and every file the pages include exists."""

from __future__ import annotations

import re
from pathlib import Path

import cuprims

DOCS = Path(__file__).resolve().parents[3] / "docs"

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



# ------------------------------------------------- the design notes' module table

ARCHITECTURE = DOCS / "design" / "architecture.md"
PACKAGE = DOCS.parent / "src" / "cuprims"
_CODE = re.compile(r"`([^`]+)`")
# a path in the table: a folder (``_base/``, ``algorithms/<home>/``) or a module or kernel file
_PATH = re.compile(r"[\w<>.-]+(/[\w<>.-]+)*(/|\.py|\.cuh)")


def _module_table(text: str) -> list[list[str]]:
    """The cells of each row of the module table (the first table under ``## Modules``),
    its header and rule left out."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) > 2, "no module table under '## Modules'"
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _matches(path: str, base: Path) -> list[Path]:
    """What ``path`` names under ``base`` (a placeholder such as ``<home>`` stands for any name)."""
    found = base.glob(re.sub(r"<[^>]*>", "*", path.rstrip("/")))
    return [p for p in found if (p.is_dir() if path.endswith("/") else p.is_file())]


def table_problems(text: str, package: Path = PACKAGE) -> list[str]:
    """Paths in the module table that ``package`` lacks, and packages of it without a row.

    A path with a folder is read from ``package``; a bare module name (``schema.py``) from
    its row's package (the first folder of the row's first cell), else from ``package``."""
    problems, heads = [], set()
    for cells in _module_table(text):
        heads.update(_CODE.findall(cells[0]))
        folders = [code for code in _CODE.findall(cells[0]) if code.endswith("/")]
        home = _matches(folders[0], package) if folders else []
        for code in (code for cell in cells for code in _CODE.findall(cell)):
            if not _PATH.fullmatch(code):
                continue
            bases = [package] if "/" in code.rstrip("/") else home + [package]
            if not any(_matches(code, base) for base in bases):
                problems.append(f"{cells[0]}: {code} is not in src/cuprims")
    packages = sorted(p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file())
    assert len(packages) > 5, packages
    problems += [f"package {p} has no row" for p in packages if p not in heads]
    return problems


def test_the_module_table_matches_the_tree():
    """architecture.md's module table names only paths that exist, and every package of
    cuprims (a folder of src/cuprims with an ``__init__.py``) heads a row."""
    assert table_problems(ARCHITECTURE.read_text(encoding="utf-8")) == []


def test_the_table_check_catches_a_stale_path_and_a_missing_row():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    stale = text.replace("`schema.py`", "`schemas.py`", 1).replace("| `_cache/` |", "| `_caches/` |", 1)
    assert stale != text
    problems = table_problems(stale)
    assert any("schemas.py" in p for p in problems), problems
    assert any("_caches/" in p for p in problems) and "package _cache/ has no row" in problems, problems


def test_the_layers_section_lists_the_layering_tests_layers():
    """architecture.md's ``## Layers`` list is tests/cpu/project/test_layering.py's LAYERS, low to
    high (names that are no unit of the package left out)."""
    import test_layering

    homes = frozenset(p.name for p in (PACKAGE / "algorithms").iterdir() if (p / "__init__.py").is_file())
    units = {test_layering.unit_of(m, homes) for m in test_layering.module_files(PACKAGE)}
    expected = [[name for name in layer if name in units or name == "algorithms.*"]
                for layer in test_layering.LAYERS]
    section = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. (.*)$", section, re.MULTILINE)
    written = [[{"cuprims": "", "algorithms.<home>": "algorithms.*"}.get(n, n) for n in _CODE.findall(item)
                if not n.endswith(".py")] for item in items]
    assert written == [layer for layer in expected if layer], written


# cuda.compute 1.2.1's public names (its documented surface, which cuprims keeps)
CUDA_COMPUTE_NAMES = (
    "make_reduce_into reduce_into make_inclusive_scan inclusive_scan make_exclusive_scan exclusive_scan "
    "make_segmented_reduce segmented_reduce make_unary_transform unary_transform make_binary_transform "
    "binary_transform make_radix_sort radix_sort make_merge_sort merge_sort make_segmented_sort segmented_sort "
    "make_lower_bound lower_bound make_upper_bound upper_bound make_select select make_three_way_partition "
    "three_way_partition make_unique_by_key unique_by_key make_histogram_even histogram_even CountingIterator "
    "ConstantIterator CacheModifiedInputIterator ReverseIterator PermutationIterator ZipIterator ShuffleIterator "
    "DiscardIterator TransformIterator TransformOutputIterator OpKind RawOp gpu_struct ProxyArray ProxyValue "
    "SortOrder Determinism DoubleBuffer serialize deserialize clear_all_caches").split()


def test_the_compatibility_page_lists_every_cuda_compute_name_and_each_is_exported():
    page = (DOCS / "compatibility.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"``(\w+)``", page))
    assert not [n for n in CUDA_COMPUTE_NAMES if n not in listed], "names missing from docs/compatibility.rst"
    assert not [n for n in CUDA_COMPUTE_NAMES if n not in cuprims.__all__], "names cuprims does not export"
