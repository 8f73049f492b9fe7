"""Fixtures for the CPU suite (no GPU): every test gets an empty on-disk cache and empty
in-memory caches, so a test never passes because an earlier one warmed a cache.

Tests that only need *some* build (not a cold one) ask for ``shared_cache``: it points
CUPRIMS_CACHE_DIR at one directory kept for the whole session (one per xdist worker), so
NVRTC work done by one test is read back from disk by the next (in-memory caches are still
emptied per test).

The subfolders mirror src/cuprims (algorithms/, coop/, compile/, cache/, ...; project/ for
the repository as a whole, reliability/ for the cross-cutting matrices). pytest's import
mode puts this folder on sys.path when it loads this file, so every subfolder imports
cpu_helpers by name, and the fixtures here serve every subfolder (none keeps a copy).
"""

from __future__ import annotations

from pathlib import Path

import os

import pytest

import cuprims
from cuprims._base import stats
from cuprims.algorithms import scratch

# Precompiled headers stay within each process in this suite (session fixtures and the
# processes tests start included): every test's fresh cache directory would otherwise get
# a PCH per header prefix (~15 MB packed, and ~0.2 s to pack), copied along with prebuilt caches.
# tests/cpu/compile/test_pch_disk.py turns them on in its own processes.
os.environ.setdefault("CUPRIMS_PCH_DISK", "0")

_ENV_VARS = ("CUPRIMS_CACHE_DIR", "CUPRIMS_DISK_CACHE", "CUPRIMS_DUMP_DIR", "CUPRIMS_MEMORY_CACHE",
             "CUPRIMS_TRACE", "CUPRIMS_CACHE_MAX_BYTES", "CUPRIMS_CACHE_LOCK_TIMEOUT", "CUPRIMS_DIRECT_OPS",
             "CUPRIMS_DIRECT_CUBIN")


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path, monkeypatch):
    """An empty CUPRIMS_CACHE_DIR, empty in-memory caches and zeroed counters for each test."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    cache_dir = tmp_path / "cuprims-cache"
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(cache_dir))
    # the shared one-shot buffer a fake device of an earlier test handed out is not this test's
    monkeypatch.setattr(scratch, "_buffers", {})
    cuprims.clear_all_caches()
    stats.reset()
    yield cache_dir
    cuprims.clear_all_caches()


@pytest.fixture(scope="session")
def warm_cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cuprims-warm-cache")


@pytest.fixture
def shared_cache(fresh_caches, warm_cache_dir, monkeypatch) -> Path:
    """Use the session-wide disk cache (builds shared between tests); memory stays cold."""
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(warm_cache_dir))
    return warm_cache_dir


@pytest.fixture
def numba_ops(monkeypatch):
    """Every Python operator compiled by numba and linked, small expressions too (the
    path a test of numba's stages or of linked-operator code means to exercise)."""
    monkeypatch.setenv("CUPRIMS_DIRECT_OPS", "0")


@pytest.fixture
def sm90(shared_cache):
    """coop primitives built for sm_90 (no device to ask) over the session-wide disk cache; a
    coop test file takes it for all its tests with ``pytestmark = pytest.mark.usefixtures("sm90")``."""
    from cuprims import coop

    with coop.target((9, 0)):
        yield
