"""GPU tests: skipped (not failed) on machines without a usable CUDA GPU and CuPy."""

from __future__ import annotations

import fcntl
import os
import tempfile

import pytest


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAVE_GPU = _gpu_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)


_BIG_LOCK = os.path.join(tempfile.gettempdir(), "cuprims-gpu-big-memory.lock")


@pytest.fixture(autouse=True)
def _one_big_memory_test_at_a_time(request):
    """Tests marked ``big_memory`` (inputs past 2^31 items: tens of GB) take a lock shared by
    every xdist worker on this machine, so two of them never hold their buffers at once, and
    hand their memory back to the device when done (CuPy's pool would keep it from the next)."""
    if request.node.get_closest_marker("big_memory") is None:
        yield
        return
    with open(_BIG_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            import gc

            gc.collect()
            try:
                import cupy

                cupy.get_default_memory_pool().free_all_blocks()
            except Exception:
                pass
            fcntl.flock(lock, fcntl.LOCK_UN)
