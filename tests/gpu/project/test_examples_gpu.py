"""Every examples/coop/*.py and examples/algorithms/*.py, run as a script on the GPU: each
checks its own results against numpy, so it must exit 0 and print its 'ok' line. The user
guide (docs/guide/) shows the algorithm scripts, so this is what keeps its examples right.

Each runs in a fresh interpreter (as a user would run it) with this checkout's cuprims
first on PYTHONPATH. The coop ones are compiled and linked without a GPU by
tests/cpu/coop/test_coop_examples.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[3] / "examples"
FOLDERS = ("coop", "algorithms")
EXAMPLES = sorted(p for folder in FOLDERS for p in (_ROOT / folder).glob("*.py"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_examples_are_found(folder):
    found = [p for p in EXAMPLES if p.parent.name == folder]
    assert len(found) >= 10, found       # an empty glob must not pass as "nothing failed"


@pytest.mark.parametrize("path", EXAMPLES, ids=[f"{p.parent.name}/{p.stem}" for p in EXAMPLES])
def test_example_runs(path, script_runner):
    run = script_runner(path, path.parent)
    assert run.returncode == 0, f"{path.name} exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "ok" in run.stdout.split(), run.stdout      # the script's "<name>: ok" line
