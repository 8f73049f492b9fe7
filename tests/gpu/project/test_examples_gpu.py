"""Every examples/coop/*.py and examples/algorithms/*.py, run as a script on the GPU: each
checks its own results against numpy, so it must exit 0 and print its 'ok' line. The user
guide (docs/guide/) shows the algorithm scripts, so this is what keeps its examples right.

Each runs in a fresh interpreter (as a user would run it) with this checkout's cuprims
first on PYTHONPATH. The coop ones are compiled and linked without a GPU by
tests/cpu/coop/test_coop_examples.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cuprims

_ROOT = Path(__file__).resolve().parents[3] / "examples"
FOLDERS = ("coop", "algorithms")
EXAMPLES = sorted(p for folder in FOLDERS for p in (_ROOT / folder).glob("*.py"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_examples_are_found(folder):
    found = [p for p in EXAMPLES if p.parent.name == folder]
    assert len(found) >= 10, found       # an empty glob must not pass as "nothing failed"


@pytest.mark.parametrize("path", EXAMPLES, ids=[f"{p.parent.name}/{p.stem}" for p in EXAMPLES])
def test_example_runs(path):
    env = dict(os.environ)
    src = str(Path(cuprims.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    run = subprocess.run([sys.executable, str(path)], cwd=path.parent, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"{path.name} exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "ok" in run.stdout.split(), run.stdout      # the script's "<name>: ok" line
