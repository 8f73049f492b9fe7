"""``clear_all_caches()`` and ``cache_info()``."""

from __future__ import annotations

import sys
from typing import Any

from cuprims import config


def clear_all_caches(*, disk: bool = False) -> None:
    """Forget every compiled algorithm held in memory (and, with ``disk=True``, on disk), and
    return the device memory that one-shot calls freed (kept for their next calls) to the driver.

    With the algorithm objects and their compiled code go the remembered descriptions of
    their operators and the entries numba keeps for the device functions compiled from
    them: nothing of an earlier algorithm build stays reachable from cuprims. Safe to call at
    any time from any thread, also while another thread builds; where one-shot calls have
    used device memory, it waits for the work queued on the current device, whose frees must
    happen before that memory can be given back.

    Example::

        cuprims.clear_all_caches()            # the next make_* rebuilds or reads the disk cache
        cuprims.clear_all_caches(disk=True)   # also delete this cache directory's entries
    """
    from cuprims._build import build
    from cuprims.algorithms.common import invalidate_wrapper_caches

    build.clear_memory()
    for used in ("cuprims.coop._build", "cuprims._operators.cpp_ops"):   # only if used: no import here
        module = sys.modules.get(used)
        if module is not None:
            module.clear_memory()
    # What was remembered of each built operator: its description, and the entries numba
    # keeps for the device functions compiled from it (only if numba was used: no import here).
    from cuprims.op import forget_python_specs

    forget_python_specs()
    numba_device = sys.modules.get("cuprims._operators.numba_device")
    if numba_device is not None:
        numba_device.forget_compiled_operators()
    # Per-thread caches of algorithm objects are emptied in every thread, and remembered
    # descriptions dropped.
    invalidate_wrapper_caches()
    from cuprims.algorithms.skeleton import Algorithm

    Algorithm._forget_descriptions()
    from cuprims._runtime import driver

    from cuprims.algorithms import scratch

    scratch.release()    # the buffer one-shot calls on the legacy default stream share
    driver.trim_pools()  # device memory one-shot calls freed, kept for reuse until now
    _release_freed_memory()
    if disk:
        cache = build.disk_cache()
        if cache is not None:
            cache.clear()


def _release_freed_memory() -> None:
    """Give the heap that compiled code and the compilers freed back to the system.

    nvJitLink and NVVM allocate and free several MB per build; glibc keeps freed blocks for
    reuse, so without this a long-lived process's resident memory only grows (about
    0.3 MB per distinct build) even after every cache is emptied."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        pass


def cache_info() -> dict[str, Any]:
    """Counters of this process's compiles and cache hits, and where the disk cache lives.

    Keys: ``numba_compiles``, ``nvrtc_compiles``, ``links``, ``memory_hits``,
    ``memory_misses``, ``disk_hits``, ``disk_misses``, ``disk_writes``,
    ``disk_corrupt_discarded``, ``module_loads``, ``pch_builds``, ``pch_loads``,
    ``pch_writes``, ``pch_uses``, ``pch_hits``, ``pch_rejects``, ``pch_heap``,
    ``memory_entries``, ``cache_dir``, ``disk_enabled``, ``disk_status``.

    ``module_loads`` counts compiled code loaded onto a device: once per build and device
    (a second GPU of the same capability loads the build again, and compiles nothing).

    The ``pch_`` keys count NVRTC precompiled headers: made (``pch_builds``), read from the
    disk cache after their checksum was verified (``pch_loads``), written to it
    (``pch_writes``), and compiles given one (``pch_uses``), of which NVRTC used
    (``pch_hits``) or refused (``pch_rejects``) it; ``disk_writes`` and ``disk_hits`` do not
    include them. ``pch_heap`` says whether this process's PCHs persist in the disk cache
    (its NVRTC heap was placed at the shared address) or stay within the process, and why.

    ``disk_corrupt_discarded`` counts disk entries (PCHs too) that failed any check and were deleted
    (to be rebuilt): damaged or truncated, written for another key or kind, malformed
    metadata, not a regular file (a symlink, a FIFO, a device), or larger than the read
    bound. ``disk_status`` is ``"ok"``, ``"disabled"``, or why the cache directory cannot
    be used (not writable, not a directory, a symlink, not owned by you, or writable by
    others); builds then still work, they are just not kept. Such a problem is also
    logged once per process and directory as a warning on the ``cuprims`` logger.

    Example::

        info = cuprims.cache_info()
        print(info["nvrtc_compiles"], info["disk_hits"])   # a second process with a warm disk cache
                                                           # compiles nothing: 0, and its builds are hits
    """
    from cuprims._base import stats
    from cuprims._build import build
    from cuprims._compile import pch_heap_state

    info: dict[str, Any] = stats.snapshot()
    info["pch_heap"] = pch_heap_state.heap_status() if config.settings.pch else "off (CUPRIMS_PCH=0)"
    info["memory_entries"] = len(build.memory_cache())
    info["cache_dir"] = str(config.cache_dir())
    info["disk_enabled"] = config.disk_cache_enabled()
    disk = build.disk_cache()
    info["disk_status"] = "disabled" if disk is None else disk.status()
    return info
