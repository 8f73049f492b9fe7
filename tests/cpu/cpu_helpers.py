"""Helpers shared by the CPU tests (plain functions; the fixtures live in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import cuprims
from cuprims._jit import stats

ARCH = 90  # every AOT build here names its target explicitly


def counters() -> dict:
    return stats.snapshot()


def delta(before: dict, keys=("numba_compiles", "nvrtc_compiles", "links")) -> dict:
    now = stats.snapshot()
    return {k: now[k] - before.get(k, 0) for k in keys}


def make_f4(op, *, cc=ARCH, h_init=True, dtype=np.float32, out_dtype=None, **kwargs):
    """make_reduce_into over ProxyArray placeholders (ahead of time, no GPU)."""
    out_dtype = dtype if out_dtype is None else out_dtype
    return cuprims.make_reduce_into(
        d_in=cuprims.ProxyArray(dtype), d_out=cuprims.ProxyArray(out_dtype), op=op,
        h_init=cuprims.ProxyValue(out_dtype) if h_init else None, compute_capability=cc, **kwargs)


def run_python(code: str, *, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; raise with its output if it fails."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_json(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON line in output:\n{stdout}"
    return json.loads(lines[-1])
