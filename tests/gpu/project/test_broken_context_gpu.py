"""The GPU tests' guard against a broken CUDA context (tests/gpu/conftest.py): a test whose
kernel faults ends its process, so that it alone is reported, rather than every later
test of that process failing on the same sticky error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

_TESTS = '''
import numpy as np
from numba import cuda


def test_a_kernel_that_faults():
    @cuda.jit
    def far(x):
        x[1 << 40] = 1.0        # far past the array: an illegal address
    x = cuda.device_array(4, np.float32)
    far[1, 1](x)
    cuda.synchronize()


def test_one_after_it():
    assert cuda.to_device(np.arange(4, dtype=np.float32)).copy_to_host().sum() == 6
'''


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    shutil.copy(Path(__file__).resolve().parents[1] / "conftest.py", folder / "conftest.py")
    (folder / "test_fault.py").write_text(_TESTS)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(folder)],
                          cwd=folder, capture_output=True, text=True, timeout=600, env=_fresh_session_environ())


def _fresh_session_environ() -> dict[str, str]:
    """This process's environment less xdist's worker variables: run from a test under
    xdist, the child is still a session of its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def test_without_xdist_the_session_stops_naming_the_test(tmp_path):
    run = _run(tmp_path, "-p", "no:xdist")
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "test_a_kernel_that_faults left the CUDA context broken: an illegal address" in out, out[-3000:]
    assert "1 failed" in out and "passed" not in out, out[-3000:]


def test_under_xdist_the_worker_ends_and_the_rest_runs(tmp_path):
    pytest.importorskip("xdist")
    run = _run(tmp_path, "-n", "1")
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "crashed while running" in out and "test_a_kernel_that_faults" in out, out[-3000:]
    assert "1 passed" in out, out[-3000:]
