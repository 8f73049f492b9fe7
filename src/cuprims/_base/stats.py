"""Process-wide counters behind ``cuprims.cache_info()``."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterator

from cuprims._base.log import debug_enabled
from cuprims._base.log import logger as _logger

_lock = threading.Lock()
_counts: dict[str, int] = {
    "numba_compiles": 0,
    "nvrtc_compiles": 0,
    "links": 0,
    "memory_hits": 0,
    "memory_misses": 0,
    "disk_hits": 0,
    "disk_misses": 0,
    "disk_writes": 0,
    "disk_corrupt_discarded": 0,
    "module_loads": 0,
    # NVRTC precompiled headers (_compile/pch.py): made, read from the disk cache and written
    # to it, compiles given one, and of those the ones NVRTC used or refused
    "pch_builds": 0,
    "pch_loads": 0,
    "pch_writes": 0,
    "pch_uses": 0,
    "pch_hits": 0,
    "pch_rejects": 0,
}


def bump(name: str, by: int = 1) -> None:
    with _lock:
        _counts[name] = _counts.get(name, 0) + by


# builds running on worker threads (coop's background provider builds): the counters are
# read, and reset, only once they are done, so a reading never misses a build already asked for
_in_flight: set = set()
BACKGROUND_THREADS = "cuprims-background"   # the name prefix of their threads


def track(future) -> None:
    """Count ``future`` (a concurrent.futures.Future) as in flight until it is done."""
    with _lock:
        _in_flight.add(future)
    future.add_done_callback(_landed)


def _landed(future) -> None:
    with _lock:
        _in_flight.discard(future)


def settle() -> None:
    """Wait for every tracked build (their errors belong to whoever waits for the result).
    A no-op on the builds' own threads, which must never wait for themselves."""
    if threading.current_thread().name.startswith(BACKGROUND_THREADS):
        return
    while True:
        with _lock:
            pending = list(_in_flight)
        if not pending:
            return
        for f in pending:
            f.exception()


def _after_fork_in_child() -> None:
    # the threads running tracked builds stayed in the parent (coop builds those here when
    # asked); a lock a parent thread held at the fork would never be released
    global _lock
    _lock = threading.Lock()
    _in_flight.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def snapshot() -> dict[str, int]:
    settle()
    with _lock:
        return dict(_counts)


def reset() -> None:
    settle()
    with _lock:
        for k in _counts:
            _counts[k] = 0


@contextlib.contextmanager
def stage(name: str, detail: str = "") -> Iterator[None]:
    """Time a build stage: logged at DEBUG on the ``cuprims`` logger, and printed to stderr
    when CUPRIMS_TRACE=1."""
    from cuprims import config

    trace, debug = config.trace_enabled(), debug_enabled()
    if not (trace or debug):
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - t0
        if debug:
            _logger.debug("cuprims: %s %.3f s %s", name, elapsed, detail)
        if trace:
            print(f"[cuprims] {name:14s} {elapsed:8.3f} s  {detail}", file=sys.stderr)
