"""NVRTC precompiled headers (PCHs), made once per header prefix and kept in the disk cache.

Parsing CUB's and libcu++'s headers is most of an NVRTC compile (~0.8 of 1.0 s for a
reduction on the 2-core CPU machine). Units that start with the same headers (their
:attr:`~.codegen.Source.header_prefix`) under the same options share a PCH: a compile
with it takes ~0.3 s there.

**Persistent PCHs.** An NVRTC PCH is a snapshot of NVRTC's PCH heap and is valid only
where that heap lies at the same virtual address (NVRTC warns #20282 and compiles without
it otherwise). So before its first PCH a process places its heap at a fixed address
(:mod:`.pch_heap`: ~20 ms, plus ~30 ms to load NVRTC's builtins with a trivial compile
when nothing was compiled yet); when that worked, PCHs are disk-cache entries of kind
``pch`` (:mod:`.pch_store`), usable by every later process whose heap is placed there:

* a compile whose prefix has no PCH on disk makes it as part of that compile (NVRTC's
  ``--create-pch``: ~+0.2 s once per prefix and cache, the trace stage ``pch create``
  around that compile, inside ``nvrtc``; ``pch store`` packs and publishes it, ~0.15 s
  for 150 MB on the 2-core machine);
* a compile whose prefix has one loads it (``pch load``: read the packed entry, check its
  size and CRC-32, unpack it on threads into a sealed memory file: ~0.1 s for 150 MB on
  the 2-core machine) and compiles with it; later compiles in the process reuse it while
  it stays within :data:`RESIDENT_BYTES`.

Made inline, not in the background: measured on the 2-core machine, the user's compile
beside a background ``--create-pch`` compile of the same unit took 2.2-3.1 s, inline
1.4-1.7 s (plain 1.2-1.6 s), and the PCH was ready later; and a process may end while
NVRTC runs in a thread of ours, which crashed the interpreter. (docs/design/pch.md has these
and the other NVRTC facts the design rests on.)

**Within the process only** (the previous behaviour, kept as the fallback): when the heap
could not be placed (the address is taken, ``ulimit -s unlimited``'s bottom-up layout, a
heap mapped before), when ``CUPRIMS_PCH_DISK=0``, the disk cache is off, or its cap is
under 1 GiB. Then the first compile of a prefix runs as it always did (a process that
builds one algorithm once pays nothing), the second also writes the prefix's PCH into a
private temporary directory removed at exit, and later ones use it.

**Checks.** Every compile with a PCH reads NVRTC's log: "using precompiled header file"
counts a ``pch_hits``; anything else is a ``pch_rejects``: the prefix compiles without a
PCH for the rest of the process, a refused disk file is deleted (stale: #626 another NVRTC
build, #629 other options, #630 other directives), and a heap-address refusal (#20282)
stops persistent PCHs in this process. A compile that fails with a PCH is retried without
(errors are always NVRTC's own); if that one succeeds the PCH is treated as refused. The
heap is never resized after it is mapped: it is 1 GiB, PCHs need 64-330 MB, and our
compiles call NVRTC directly (:func:`.nvrtc.nvrtc_compile`), which leaves a PCH that does
not fit unwritten. Other code in the process may resize it (cuda.core's ``Program`` does
when ``--create-pch`` runs out): a resize is detected and stops persistent PCHs.

**Threads.** One lock serialises every compile that makes or uses a PCH, and the heap's
placement (once per process; our other compiles wait for that, at most 2 s, rather than
start NVRTC while the address space is being arranged); a compile that would have to
wait for the lock otherwise compiles without a PCH. Across processes, making a prefix's PCH takes the disk cache's ``pch`` lock without
waiting: a process that finds another one making it compiles without. Locks nest as
cubin > kernel > pch. No thread of ours is ever inside NVRTC at exit.

``CUPRIMS_PCH=0`` (``settings.pch``) turns all of this off; ``CUPRIMS_PCH_DISK=0``
(``settings.pch_disk``) keeps PCHs within the process.
"""

from __future__ import annotations

import atexit
import collections
import functools
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import threading
from typing import Any, Callable

from cuprims import config
from cuprims._base import stats
from cuprims._base.log import logger
from cuprims._cache.files import UnsafeDirectory
from cuprims._compile import pch_heap, pch_store

# Set once, before the heap is mapped: resizing it later would invalidate every PCH made
# before (NVRTC checks the heap address a PCH was made at).
HEAP_BYTES = 1 << 30
_NEW, _SEEN, _FAILED = "new", "seen", "failed"
_PLAIN = object()   # "compile without a PCH, after releasing the lock"
_USED = "using precompiled header file"
_WARNING = re.compile(r"#(\d+)-D")
HEAP_WARNING = "20282"


class _UnitError(Exception):
    """Carries (as its cause) a compile error that is the unit's own, through the PCH code."""


_lock = threading.Lock()                 # held by every compile that creates or uses a PCH
_state_lock = threading.Lock()
_state: dict[str, str] = {}              # key -> PCH path, _SEEN (compiled once) or _FAILED
_on_disk: dict[str, tuple[pch_store.PchStore, str, tuple[int, int]]] = {}   # path -> its entry
_kept_fds: list[int] = []                # PCHs handed to NVRTC as /proc/self/fd/N that have no disk entry
# The unpacked PCHs of disk entries that this process keeps open for its later compiles,
# least recently used first: key -> (fd, bytes). They are memory files (memory, not page
# cache), so past RESIDENT_BYTES the least recently used are closed, and loaded again from
# the disk cache when a compile needs them (~0.1-0.15 s for 150 MB on the 2-core machine).
_resident: collections.OrderedDict[str, tuple[int, int]] = collections.OrderedDict()
RESIDENT_BYTES = 512 << 20
_directory: str | None = None
_heap_size_set = False
_heap_mapped = False                     # NVRTC's heap exists (or is about to): placed once
_heap_address: int | None = None         # where it was placed (persistent PCHs usable)
_heap_note = "not mapped yet"
# While one thread places the heap, our other compiles wait (at most _PLACE_WAIT s) rather
# than start NVRTC, whose arenas and libraries would be mapped in the window.
_placing = threading.Event()
_placed = threading.Event()
_PLACE_WAIT = 2.0


def _dir() -> str:
    global _directory
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="cuprims-pch-")   # 0700, ours
        atexit.register(shutil.rmtree, _directory, True)
    return _directory


def _key(prefix: str, options: dict[str, Any]) -> str:
    return hashlib.sha256(repr((prefix, sorted(options.items(), key=lambda kv: kv[0]))).encode()).hexdigest()[:24]


def heap_status() -> str:
    """Where this process's PCHs live: what ``cache_info()["pch_heap"]`` shows."""
    if _heap_address is not None:
        return f"placed at {_heap_address:#x}: PCHs persist in the disk cache"
    return _heap_note


def pch_verdict(log: str) -> str | None:
    """None if NVRTC's log says it used the PCH, else why not (the warning number)."""
    if _USED in log:
        return None
    codes = _WARNING.findall(log)
    return f"#{codes[0]}" if codes else "no PCH message"


# ---------------------------------------------------------------------------- the heap
def _nvrtc():
    from cuda.bindings import nvrtc

    return nvrtc


def _set_heap_size() -> None:
    global _heap_size_set
    if not _heap_size_set:
        _nvrtc().nvrtcSetPCHHeapSize(HEAP_BYTES)
        _heap_size_set = True


def _raw_compile(text: bytes, options: list[bytes]) -> None:
    nvrtc = _nvrtc()
    _, prog = nvrtc.nvrtcCreateProgram(text, b"cuprims_pch_heap.cu", 0, [], [])
    try:
        nvrtc.nvrtcCompileProgram(prog, len(options), options)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _warm_up() -> None:
    """Load NVRTC's builtins library (NVRTC loads it at its first compile) before the heap
    is placed, so that this code library is not mapped next to the fixed address (its
    own address stays random)."""
    if not any("libnvrtc-builtins" in name for _, _, _, name in pch_heap.mappings()):
        _raw_compile(b"__global__ void cuprims_pch_warm_up() {}\n", [])


def _trigger() -> None:
    """A tiny ``--create-pch`` compile: makes NVRTC map its heap."""
    path = os.path.join(_dir(), "heap.pch")
    try:
        _raw_compile(b"int cuprims_pch_heap;\n", [f"--create-pch={path}".encode(), b"--pch-messages=false"])
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


def _map_heap(place: bool) -> None:
    """Set the heap's size and, with ``place``, map it at the fixed address (the caller
    holds ``_lock``). Only the first call does anything."""
    global _heap_mapped, _heap_address, _heap_note
    if _heap_mapped:
        return
    _heap_mapped = True
    try:
        _set_heap_size()
        if not place:
            _heap_note = "within the process only (persistent PCHs were off when the first PCH was made)"
            return
        _placing.set()
        with stats.stage("pch steer"):
            try:
                _warm_up()
                _heap_address, why = pch_heap.place_heap(HEAP_BYTES, _trigger)
            except Exception as exc:  # noqa: BLE001 - only an optimisation
                _heap_address, why = None, f"{type(exc).__name__}: {exc}"
    finally:
        _placed.set()
    if _heap_address is None:
        _heap_note = f"within the process only: the heap could not be placed ({why})"
        logger.debug("cuprims: NVRTC's PCH heap could not be placed: %s", why)


def _heap_lost(why: str) -> None:
    global _heap_address, _heap_note
    if _heap_address is not None:
        logger.debug("cuprims: persistent PCHs stop in this process: %s", why)
    _heap_address = None
    _heap_note = f"within the process only: {why}"


def _heap_resized() -> bool:
    try:
        _, size = _nvrtc().nvrtcGetPCHHeapSize()
    except Exception:  # noqa: BLE001
        return False
    return int(size) != HEAP_BYTES


def _persistence_wanted() -> bool:
    return (config.settings.pch_disk and config.disk_cache_enabled() and sys.platform.startswith("linux")
            and pch_store.wanted(config.cache_max_bytes()) and (not _heap_mapped or _heap_address is not None)
            and _codec_available())


@functools.lru_cache(maxsize=None)
def _codec_available() -> bool:
    from cuprims._compile import pch_codec

    return pch_codec.available()


def _store() -> pch_store.PchStore | None:
    """The disk cache's PCHs, or None when this process cannot use them (the caller holds
    ``_lock``; the heap is placed at the first call)."""
    _map_heap(place=True)
    if _heap_address is None:
        return None
    from cuprims._cache.disk import DiskCache

    return pch_store.PchStore(DiskCache(config.cache_dir(), config.cache_max_bytes()))


# ---------------------------------------------------------------------------- compiles
def compile_with_pch(prefix: str, options: dict[str, Any],
                     compile_unit: Callable[..., Any]) -> Any:
    """``compile_unit(extra_options, logs=None)`` with the prefix's PCH when there is one
    (made now, from the disk cache, or made earlier in this process; see the module
    docstring for when each happens)."""
    if not config.settings.pch:
        return compile_unit({})
    if _placing.is_set():
        _placed.wait(_PLACE_WAIT)
    key = _key(prefix, options)
    with _state_lock:
        state = _state.get(key, _NEW)
        if state == _NEW:
            _state[key] = _SEEN
    persist = _persistence_wanted()
    if state == _FAILED or (state == _NEW and not persist):
        return compile_unit({})
    if not _lock.acquire(blocking=False):
        if persist and not _heap_mapped:
            _placed.wait(_PLACE_WAIT)   # the holder is (about to be) placing the heap
        return compile_unit({})
    try:
        result = _compile_locked(key, prefix, options, compile_unit, first=state == _NEW, persist=persist)
    except _UnitError as exc:
        raise exc.__cause__ from None
    finally:
        _lock.release()
    return compile_unit({}) if result is _PLAIN else result


def _compile_locked(key: str, prefix: str, options: dict[str, Any], compile_unit: Callable[..., Any], *,
                    first: bool, persist: bool) -> Any:
    with _state_lock:
        state = _state[key]   # again, under the PCH lock: another thread may have made it
    if state == _FAILED:
        return _PLAIN
    if state != _SEEN:
        return _compile_using(key, state, compile_unit)
    store = _store() if persist else None
    if store is not None:
        return _compile_from_store(store, key, prefix, options, compile_unit)
    if first:
        return _PLAIN
    return _compile_creating(key, compile_unit)


def _compile_from_store(store: pch_store.PchStore, key: str, prefix: str, options: dict[str, Any],
                        compile_unit: Callable[..., Any]) -> Any:
    assert _heap_address is not None
    try:
        disk_key = pch_store.pch_key(prefix, options, _heap_address, HEAP_BYTES)
        path = _load(store, key, disk_key)
        if path is None:
            with store.cache.try_lock(pch_store.KIND, disk_key) as held:
                if not held:
                    return _PLAIN   # another process is making it: the next compile looks again
                path = _load(store, key, disk_key)   # it may have finished meanwhile
                if path is None:
                    return _create_in_store(store, key, disk_key, compile_unit)
    except _UnitError:
        raise   # the unit's own error (NVRTC's), not the PCH's
    except Exception as exc:  # noqa: BLE001 - the disk's PCHs are only an optimisation
        logger.debug("cuprims: persistent PCHs failed: %s: %s", type(exc).__name__, exc)
        _heap_lost(f"persistent PCHs failed ({type(exc).__name__}: {exc})")
        return _PLAIN
    return _compile_using(key, path, compile_unit)



def _load(store: pch_store.PchStore, key: str, disk_key: str) -> str | None:
    with stats.stage("pch load"):
        got = store.load(disk_key)
    if got is None:
        return None
    fd, ident = got
    stats.bump("pch_loads")
    return _keep(key, fd, (store, disk_key, ident))


def _keep(key: str, fd: int, origin: tuple[pch_store.PchStore, str, tuple[int, int]] | None) -> str:
    """Make the PCH open as ``fd`` the prefix's for this process's compiles; one with a disk
    entry (``origin``) is resident (see :data:`RESIDENT_BYTES`). Returns NVRTC's path of it."""
    path = _fd_path(fd)
    with _state_lock:
        if key in _resident:
            _release(key)   # a copy made or loaded again meanwhile replaces it
        _state[key] = path
        if origin is None:
            _kept_fds.append(fd)
            return path
        _on_disk[path] = origin
        _resident[key] = (fd, os.fstat(fd).st_size)
        _resident.move_to_end(key)
        total = sum(size for _, size in _resident.values())
        for other in [k for k in _resident if k != key]:   # least recently used first
            if total <= RESIDENT_BYTES:
                break
            total -= _resident[other][1]
            _release(other)
    return path


def _fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _release(key: str) -> None:
    """Close the resident PCH of ``key`` (the caller holds ``_lock``, so no compile is
    reading it, and ``_state_lock``); a later compile of the prefix loads it again."""
    fd, _ = _resident.pop(key)
    path = _fd_path(fd)
    _on_disk.pop(path, None)
    if _state.get(key) == path:
        _state[key] = _SEEN
    os.close(fd)


def _create_in_store(store: pch_store.PchStore, key: str, disk_key: str, compile_unit: Callable[..., Any]) -> Any:
    """Compile the unit while NVRTC writes its prefix's PCH into the disk cache (the caller
    holds ``_lock`` and the entry's inter-process lock)."""
    try:
        pending = store.begin(disk_key)
    except (UnsafeDirectory, OSError) as exc:
        store.cache.note_unusable(exc, "cannot write a precompiled header")
        return _compile_creating(key, compile_unit)
    try:
        with stats.stage("pch create", "NVRTC compile that also writes the PCH"):
            obj = compile_unit({"create_pch": pending.path})
    except Exception:  # noqa: BLE001 - a PCH is only an optimisation: compile as always
        store.discard(pending)
        return _compile_plain_after_failed_create(key, compile_unit)
    stats.bump("pch_builds")
    resized = _heap_resized()
    if resized:
        _heap_lost("NVRTC's PCH heap was resized")
    try:
        with stats.stage("pch store"):
            fd, ident = store.publish(pending, {"heap": f"{_heap_address or 0:#x}", "heap_bytes": HEAP_BYTES},
                                      keep=not resized)
    except Exception as exc:  # noqa: BLE001 - the compile succeeded: its PCH is only an optimisation
        logger.debug("cuprims: could not keep a precompiled header: %s: %s", type(exc).__name__, exc)
        store.discard(pending)
        fd, ident = None, None
    if ident is not None:
        stats.bump("pch_writes")
    if fd is None:
        with _state_lock:
            _state[key] = _FAILED
    else:
        _keep(key, fd, None if ident is None else (store, disk_key, ident))
    return obj


def _compile_creating(key: str, compile_unit: Callable[..., Any]) -> Any:
    """Compile the unit while making the PCH of its headers in this process's temporary
    directory (the caller holds ``_lock``)."""
    path = os.path.join(_dir(), f"{key}.pch")
    _map_heap(place=False)
    stats.bump("pch_builds")
    try:
        with stats.stage("pch create", "NVRTC compile that also writes the PCH (this process only)"):
            obj = compile_unit({"create_pch": path})
    except Exception:  # noqa: BLE001 - a PCH is only an optimisation: compile as always
        return _compile_plain_after_failed_create(key, compile_unit)
    if _heap_resized():
        _heap_lost("NVRTC's PCH heap was resized")
    with _state_lock:
        _state[key] = path if os.path.exists(path) else _FAILED
    return obj


def _compile_plain_after_failed_create(key: str, compile_unit: Callable[..., Any]) -> Any:
    """A compile that made a PCH failed: compile without. If that fails too, the error is
    the unit's (NVRTC's own, raised) and the prefix may still get a PCH from another unit;
    otherwise making its PCH is what failed, and it is not tried again in this process."""
    try:
        obj = compile_unit({})
    except Exception as exc:
        with _state_lock:
            _state[key] = _SEEN
        raise _UnitError() from exc
    with _state_lock:
        _state[key] = _FAILED
    return obj


def _compile_using(key: str, path: str, compile_unit: Callable[..., Any]) -> Any:
    """Compile with the PCH at ``path`` and check in NVRTC's log that it was used."""
    stats.bump("pch_uses")
    logs = io.StringIO()
    try:
        obj = compile_unit({"use_pch": path}, logs)
    except Exception:  # noqa: BLE001 - retried without the PCH, which reports NVRTC's own error
        obj = compile_unit({})   # a unit that fails without the PCH too raises here: the PCH is fine
        _refused(key, path, "the compile failed with it and succeeded without")
        return obj
    why = pch_verdict(logs.getvalue())
    if why is None:
        stats.bump("pch_hits")
        with _state_lock:
            if key in _resident:
                _resident.move_to_end(key)
    else:
        stats.bump("pch_rejects")
        _refused(key, path, why)
    return obj


def _refused(key: str, path: str, why: str) -> None:
    """The PCH at ``path`` is not to be used again in this process; a stale disk file goes."""
    logger.debug("cuprims: NVRTC did not use the precompiled header %s: %s", path, why)
    with _state_lock:
        origin = _on_disk.get(path)
        if key in _resident and _fd_path(_resident[key][0]) == path:
            _release(key)   # its memory goes too
        _state[key] = _FAILED
        _on_disk.pop(path, None)
    if why == f"#{HEAP_WARNING}":
        _heap_lost("NVRTC refused a PCH for its heap address (#20282)")
    elif origin is not None:
        store, disk_key, ident = origin
        store.drop(disk_key, ident)
