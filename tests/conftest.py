"""The ``slow`` switch of the whole suite.

CI (``bash scripts/test``) runs a representative subset of the CPU suite's largest
matrices: one case per kind, dtype family or operator class. The rest of each matrix is
marked ``slow`` and runs with ``--run-slow`` or ``CUPRIMS_RUN_SLOW=1`` (the nightly-style
command in scripts/test's header). Tests under tests/gpu run whether marked or not: the
GPU run is the full-matrix run.

Two markers shape the parallel pass: ``ci_sample(every)`` on a parametrized test keeps
every ``every``-th case of it in CI (the first included; the rest count as ``slow``), and
``runs_long`` on a module sends its tests to the workers first, so that the pass ends on
short tests that an idle worker can take over (scripts/test shares the tests by work stealing).

Both suites mirror the package (tests/cpu/algorithms, tests/gpu/algorithms, .../coop, ...);
this folder holds what they share: twins.py (a CPU test's and its GPU twin's operators,
struct types, kernels and reference models) and docstring_examples.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_GPU_TESTS = Path(__file__).resolve().parent / "gpu"

# This folder on sys.path for both suites, whatever pytest's import mode (its default,
# prepend, puts it there when it loads this file): twins.py, what a CPU test and its GPU
# twin share, and docstring_examples.py are imported by name from either.
if str(_GPU_TESTS.parent) not in sys.path:
    sys.path.insert(0, str(_GPU_TESTS.parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (the full matrices; CUPRIMS_RUN_SLOW=1 does the same)")


def run_slow(config: pytest.Config) -> bool:
    """Whether this run takes the tests marked ``slow`` everywhere, not only under tests/gpu."""
    return config.getoption("--run-slow") or os.environ.get("CUPRIMS_RUN_SLOW", "") not in ("", "0")


def _sample_for_ci(items: list[pytest.Item]) -> None:
    """Mark ``slow`` the cases of each ``ci_sample(every)`` test beyond every ``every``-th."""
    seen: dict[tuple[str, str], int] = {}
    for item in items:
        marker = item.get_closest_marker("ci_sample")
        if marker is None:
            continue
        every = marker.kwargs.get("every", marker.args[0] if marker.args else 2)
        key = (str(item.fspath), getattr(item, "originalname", item.name))
        index = seen[key] = seen.get(key, -1) + 1
        if index % every:
            item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # modules marked runs_long first, each module's tests still together and in order
    items.sort(key=lambda item: item.get_closest_marker("runs_long") is None)
    _sample_for_ci(items)
    if run_slow(config):
        return
    skip = pytest.mark.skip(reason="slow: a case beyond CI's subset (--run-slow or CUPRIMS_RUN_SLOW=1 runs it)")
    for item in items:
        if item.get_closest_marker("slow") is not None and _GPU_TESTS not in Path(str(item.fspath)).parents:
            item.add_marker(skip)
