"""GPU tests: skipped (not failed) on machines without a usable CUDA GPU. On a machine
with one, CuPy must be installed (the gpu extra, which scripts/setup adds where it finds
an NVIDIA driver): without it every GPU test fails with that advice rather than skipping,
so a GPU machine never passes by running nothing."""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def _gpu_available() -> bool:
    """Whether the driver shows a GPU (asked through cuda.core, not through CuPy)."""
    try:
        from cuda.core import Device

        Device(0)
        return True
    except Exception:  # noqa: BLE001 - no driver library or no device
        return False


@functools.lru_cache(maxsize=None)
def _cupy_missing() -> str | None:
    try:
        import cupy  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


HAVE_GPU = _gpu_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cupy_on_a_gpu_machine():
    missing = _cupy_missing() if HAVE_GPU else None
    if missing is not None:
        pytest.fail(f"a GPU is here but CuPy cannot be imported ({missing}): install the gpu extra (bash "
                    "scripts/setup does where it finds an NVIDIA driver, or pip install -e '.[gpu]')", pytrace=False)


# the driver's errors that leave a process's CUDA context unusable: every later call fails
_STICKY = {700: "an illegal address", 710: "a device-side assert", 714: "a hardware stack error",
           715: "an illegal instruction", 716: "a misaligned address", 717: "an invalid address space",
           718: "an invalid program counter", 719: "a launch failure (a trap)"}
# set where a test broke the context (the process then ends as soon as pytest is done), and
# the session's exit status for that end
_BROKEN_CONTEXT = pytest.StashKey[bool]()
_EXIT_STATUS = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def _a_broken_context_ends_its_process(request):
    """After each test on a GPU machine: a test that leaves this process's CUDA context
    broken (a kernel trapped or faulted) ends the process there, so that it alone is
    reported. Under xdist the worker exits (xdist reports the test as crashing its worker
    and starts another, which runs the rest); without xdist the session stops, saying
    which test did it. Otherwise every later test in the process would fail on the same
    sticky error."""
    yield
    if not HAVE_GPU:
        return
    from cuprims._runtime import libcuda

    code = libcuda.load().cuCtxSynchronize()
    if code not in _STICKY:
        return
    message = f"{request.node.nodeid} left the CUDA context broken: {_STICKY[code]} (CUDA error {code})"
    # an xdist worker's config has workerinput; PYTEST_XDIST_WORKER would also be set in a
    # pytest started from within a worker's test
    worker = hasattr(request.config, "workerinput")
    sys.stderr.write(message + ("; this worker ends here\n" if worker else "; the session stops here\n"))
    sys.stderr.flush()
    if worker:
        os._exit(70)
    # pytest stops after this test and reports as usual; the process then ends without the
    # interpreter's shutdown, whose CUDA teardown in a broken context may kill it before
    # the buffered report reaches a pipe
    request.session.shouldstop = message
    request.config.stash[_BROKEN_CONTEXT] = True


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if config.stash.get(_BROKEN_CONTEXT, False):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(config.stash.get(_EXIT_STATUS, 1) or 1)


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


def run_script(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Script ``path`` run as a user runs it: a fresh interpreter in ``cwd``, with this
    checkout's cuprims first on PYTHONPATH; its output captured as text."""
    import cuprims

    env = dict(os.environ)
    src = str(Path(cuprims.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def script_runner():
    """:func:`run_script`, for tests that run the examples."""
    return run_script
