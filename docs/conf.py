"""Sphinx configuration of cuprims' documentation (built by scripts/docs).

The API reference is generated from the docstrings of this checkout (``src/`` first on
the path). Importing cuprims imports neither numba nor a CUDA library, and neither does
this build: cuprims.coop's single-phase calls (``coop.load``, ``coop.this_block``...)
live in modules that import numba-cuda, so their reference is read from the source
files instead of imported (``_ext/coop_stubs.py``).
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE / "_ext"))

import cuprims  # noqa: E402
import cuprims.typing  # noqa: E402

project = "cuprims"
author = "the cuprims authors"
copyright = "the cuprims authors, Apache-2.0"  # noqa: A001 (Sphinx's name)
release = cuprims.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
    "coop_stubs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path: list[str] = []

# Docstrings are Google style ("Args:", "Example::"). Signatures show their types by the
# names of cuprims.typing (an alias stays its name, linked to its entry, rather than the
# union it stands for).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "signature"
autodoc_type_aliases = {name: f"cuprims.typing.{name}" for name in cuprims.typing.__all__}
autodoc_member_order = "bysource"
autodoc_default_options = {"exclude-members": "__init__, __new__"}

# the design notes' headings are link targets (design/coop.md#style-2-single-phase-calls)
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"cuprims {release}"
pygments_style = "sphinx"


# Libraries this build must not import: cuprims imports none of them, and the pages that
# document code load nothing that would (a warning, so an error under -W, if one does).
HEAVY_MODULES = ("numba", "numba_cuda", "llvmlite", "cuda", "cupy", "torch")


def _enum_signature(app, what, name, obj, options, signature, return_annotation):
    """Enums are documented by their members, not by Enum's constructor signature."""
    if what == "class" and isinstance(obj, type) and issubclass(obj, enum.Enum):
        return "", None
    return None


def _check_imports(app, exception):
    if exception is not None:
        return
    from sphinx.util import logging

    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY_MODULES))
    if loaded:
        logging.getLogger(__name__).warning("the documentation build imported %s; document such code "
                                            "without importing it (see _ext/coop_stubs.py)", ", ".join(loaded))


def setup(app):
    app.connect("autodoc-process-signature", _enum_signature)
    app.connect("build-finished", _check_imports)
