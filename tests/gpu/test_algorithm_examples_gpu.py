"""Every examples/algorithms/*.py, run as a script on the GPU: each checks its own results
against numpy, so it must exit 0 and print its 'ok' line. The user guide (docs/guide/)
shows these scripts, so this is what keeps its examples right.

Each runs in a fresh interpreter (as a user would run it) with this checkout's cuprims
first on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cuprims

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "algorithms").glob("*.py"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 10, EXAMPLES       # an empty glob must not pass as "nothing failed"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path):
    env = dict(os.environ)
    src = str(Path(cuprims.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    run = subprocess.run([sys.executable, str(path)], cwd=path.parent, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"{path.name} exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "ok" in run.stdout.split(), run.stdout      # the script's "<name>: ok" line
