"""Fixtures of the cache-fault suite. The parent conftest gives every test a fresh,
empty CUPRIMS_CACHE_DIR; ``prebuilt`` builds the two reference algorithms once per
session and ``cache`` copies that directory into the test's own cache directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import cuprims
from fault_helpers import Built, copy_cache, describe, make_max, make_sum


@dataclass(frozen=True)
class Prebuilt:
    root: Path
    max: Built
    sum: Built


@pytest.fixture(scope="session")
def prebuilt(tmp_path_factory) -> Prebuilt:
    root = tmp_path_factory.mktemp("reliability-prebuilt") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPRIMS_CACHE_DIR", str(root))
        mp.delenv("CUPRIMS_DISK_CACHE", raising=False)
        mp.delenv("CUPRIMS_DUMP_DIR", raising=False)
        cuprims.clear_all_caches()
        built = Prebuilt(root, describe("max", make_max()), describe("sum", make_sum()))
        cuprims.clear_all_caches()
    assert built.max.kernel_key != built.sum.kernel_key
    assert built.max.cubin != built.sum.cubin
    return built


@pytest.fixture
def cache(prebuilt, fresh_caches) -> Prebuilt:
    """The prebuilt cache, copied to this test's (fresh) CUPRIMS_CACHE_DIR."""
    copy_cache(prebuilt.root, fresh_caches)
    return Prebuilt(fresh_caches, prebuilt.max, prebuilt.sum)
