"""NVRTC precompiled headers, shared by the units a process compiles.

Parsing CUB's and libcu++'s headers is most of an NVRTC compile (0.8 of 1.0 s for a
reduction on the 2-core CPU machine); units that start with the same headers (their
:attr:`~.codegen.Source.header_prefix`, under the same options) can skip it with a
precompiled header. An NVRTC PCH is a snapshot of its heap at a fixed address, so it
is only valid in the process that made it: it lives in a private temporary directory,
removed at exit, never in the disk cache.

The first compile of a prefix runs as it always did (a process that builds one
algorithm once pays nothing); the second also writes the prefix's PCH (about 0.3 s more
on the CPU machine); later ones use it (0.25 s instead of 1.0 s there). One lock
serialises every compile that makes or uses a PCH; a compile that would have to wait
for it compiles without one. A compile that fails with a PCH is retried without, so
errors are always NVRTC's own. No thread of ours is ever inside NVRTC at exit.
``CUPRIMS_PCH=0`` (``settings.pch``) turns all of this off.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from typing import Any, Callable

from .. import config
from . import stats

# Reserved once, before the first PCH is made: resizing the heap later would invalidate
# every PCH made before (NVRTC checks the heap address a PCH was made at).
HEAP_BYTES = 1 << 30
_NEW, _SEEN, _FAILED = "new", "seen", "failed"

_lock = threading.Lock()                 # held by every compile that creates or uses a PCH
_state_lock = threading.Lock()
_state: dict[str, str] = {}              # key -> PCH path, _SEEN (compiled once) or _FAILED
_directory: str | None = None
_heap_set = False


def _dir() -> str:
    global _directory
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="cuprims-pch-")   # 0700, ours
        atexit.register(shutil.rmtree, _directory, True)
    return _directory


def _key(prefix: str, options: dict[str, Any]) -> str:
    return hashlib.sha256(repr((prefix, sorted(options.items(), key=lambda kv: kv[0]))).encode()).hexdigest()[:24]


def _set_heap() -> None:
    global _heap_set
    if not _heap_set:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcSetPCHHeapSize(HEAP_BYTES)
        _heap_set = True


def compile_with_pch(prefix: str, options: dict[str, Any], compile_unit: Callable[[dict[str, Any]], Any]) -> Any:
    """``compile_unit(extra_options)`` with the prefix's PCH when one is ready; the second
    compile of a prefix also makes its PCH (costing that compile ~0.3 s), so that a
    process building one algorithm once pays nothing for PCHs."""
    if not config.settings.pch:
        return compile_unit({})
    key = _key(prefix, options)
    with _state_lock:
        state = _state.setdefault(key, _NEW)
        if state is _NEW:
            _state[key] = _SEEN
    if state in (_NEW, _FAILED) or not _lock.acquire(blocking=False):
        return compile_unit({})
    try:
        with _state_lock:
            state = _state[key]   # again, under the PCH lock: another thread may have made it
        if state == _SEEN:
            return _compile_creating(key, compile_unit)
        if state != _FAILED:
            stats.bump("pch_uses")
            try:
                return compile_unit({"use_pch": state})
            except Exception:  # noqa: BLE001 - retried without the PCH, which reports NVRTC's own error
                with _state_lock:
                    _state[key] = _FAILED
    finally:
        _lock.release()
    return compile_unit({})


def _compile_creating(key: str, compile_unit: Callable[[dict[str, Any]], Any]) -> Any:
    """Compile the unit while making the PCH of its headers (the caller holds ``_lock``)."""
    path = os.path.join(_dir(), f"{key}.pch")
    result = _FAILED
    try:
        _set_heap()
        stats.bump("pch_builds")
        obj = compile_unit({"create_pch": path})
        if os.path.exists(path):
            result = path
        return obj
    except Exception:  # noqa: BLE001 - a PCH is only an optimisation: compile as always
        return compile_unit({})
    finally:
        with _state_lock:
            _state[key] = result
