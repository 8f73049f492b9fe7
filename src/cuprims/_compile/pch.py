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
  it stays within :data:`.pch_resident.RESIDENT_BYTES`.

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
wait for the lock otherwise compiles without a PCH. Across processes, making a prefix's
PCH takes the disk cache's ``pch`` lock without waiting: a process that finds another one
making it compiles without. Locks nest as cubin > kernel > pch. No thread of ours is ever
inside NVRTC at exit.

``CUPRIMS_PCH=0`` (``settings.pch``) turns all of this off; ``CUPRIMS_PCH_DISK=0``
(``settings.pch_disk``) keeps PCHs within the process.

This module decides, per compile, whether a PCH is made, loaded or used, and checks
NVRTC's verdict; :mod:`.pch_resident` keeps what each prefix has in this process and
:mod:`.pch_heap_state` the heap's size, placement and whether PCHs still persist.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import sys
import threading
from typing import Any, Callable

from cuprims import config
from cuprims._base import stats
from cuprims._base.log import logger
from cuprims._cache.files import UnsafeDirectory
from cuprims._compile import pch_heap_state as heap
from cuprims._compile import pch_resident as resident
from cuprims._compile import pch_store
from cuprims._compile.pch_heap_state import HEAP_BYTES
from cuprims._compile.pch_resident import FAILED, NEW, SEEN

_PLAIN = object()   # "compile without a PCH, after releasing the lock"
_USED = "using precompiled header file"
_WARNING = re.compile(r"#(\d+)-D")
HEAP_WARNING = "20282"


class _UnitError(Exception):
    """Carries (as its cause) a compile error that is the unit's own, through the PCH code."""


_lock = threading.Lock()                 # held by every compile that creates or uses a PCH


def _key(prefix: str, options: dict[str, Any]) -> str:
    return hashlib.sha256(repr((prefix, sorted(options.items(), key=lambda kv: kv[0]))).encode()).hexdigest()[:24]


def pch_verdict(log: str) -> str | None:
    """None if NVRTC's log says it used the PCH, else why not (the warning number)."""
    if _USED in log:
        return None
    codes = _WARNING.findall(log)
    return f"#{codes[0]}" if codes else "no PCH message"


def _persistence_wanted() -> bool:
    return (config.settings.pch_disk and config.disk_cache_enabled() and sys.platform.startswith("linux")
            and pch_store.wanted(config.cache_max_bytes())
            and (not heap.heap_mapped() or heap.heap_address() is not None) and _codec_available())


@functools.lru_cache(maxsize=None)
def _codec_available() -> bool:
    from cuprims._compile import pch_codec

    return pch_codec.available()


def _store() -> pch_store.PchStore | None:
    """The disk cache's PCHs, or None when this process cannot use them (the caller holds
    ``_lock``; the heap is placed at the first call)."""
    heap.map_heap(place=True)
    if heap.heap_address() is None:
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
    heap.wait_if_placing()
    key = _key(prefix, options)
    state = resident.claim(key)
    persist = _persistence_wanted()
    if state == FAILED or (state == NEW and not persist):
        return compile_unit({})
    if not _lock.acquire(blocking=False):
        if persist and not heap.heap_mapped():
            heap.wait_for_placement()
        return compile_unit({})
    try:
        result = _compile_locked(key, prefix, options, compile_unit, first=state == NEW, persist=persist)
    except _UnitError as exc:
        raise exc.__cause__ from None
    finally:
        _lock.release()
    return compile_unit({}) if result is _PLAIN else result


def _compile_locked(key: str, prefix: str, options: dict[str, Any], compile_unit: Callable[..., Any], *,
                    first: bool, persist: bool) -> Any:
    state = resident.state_of(key)   # again, under the PCH lock: another thread may have made it
    if state == FAILED:
        return _PLAIN
    if state != SEEN:
        return _compile_using(key, state, compile_unit)
    store = _store() if persist else None
    if store is not None:
        return _compile_from_store(store, key, prefix, options, compile_unit)
    if first:
        return _PLAIN
    return _compile_creating(key, compile_unit)


def _compile_from_store(store: pch_store.PchStore, key: str, prefix: str, options: dict[str, Any],
                        compile_unit: Callable[..., Any]) -> Any:
    address = heap.heap_address()
    assert address is not None
    try:
        disk_key = pch_store.pch_key(prefix, options, address, HEAP_BYTES)
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
        heap.heap_lost(f"persistent PCHs failed ({type(exc).__name__}: {exc})")
        return _PLAIN
    return _compile_using(key, path, compile_unit)



def _load(store: pch_store.PchStore, key: str, disk_key: str) -> str | None:
    with stats.stage("pch load"):
        got = store.load(disk_key)
    if got is None:
        return None
    fd, ident = got
    stats.bump("pch_loads")
    return resident.keep(key, fd, (store, disk_key, ident))


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
    resized = heap.heap_resized()
    if resized:
        heap.heap_lost("NVRTC's PCH heap was resized")
    try:
        with stats.stage("pch store"):
            fd, ident = store.publish(pending, {"heap": f"{heap.heap_address() or 0:#x}", "heap_bytes": HEAP_BYTES},
                                      keep=not resized)
    except Exception as exc:  # noqa: BLE001 - the compile succeeded: its PCH is only an optimisation
        logger.debug("cuprims: could not keep a precompiled header: %s: %s", type(exc).__name__, exc)
        store.discard(pending)
        fd, ident = None, None
    if ident is not None:
        stats.bump("pch_writes")
    if fd is None:
        resident.mark(key, FAILED)
    else:
        resident.keep(key, fd, None if ident is None else (store, disk_key, ident))
    return obj


def _compile_creating(key: str, compile_unit: Callable[..., Any]) -> Any:
    """Compile the unit while making the PCH of its headers in this process's temporary
    directory (the caller holds ``_lock``)."""
    path = os.path.join(resident.temp_dir(), f"{key}.pch")
    heap.map_heap(place=False)
    stats.bump("pch_builds")
    try:
        with stats.stage("pch create", "NVRTC compile that also writes the PCH (this process only)"):
            obj = compile_unit({"create_pch": path})
    except Exception:  # noqa: BLE001 - a PCH is only an optimisation: compile as always
        return _compile_plain_after_failed_create(key, compile_unit)
    if heap.heap_resized():
        heap.heap_lost("NVRTC's PCH heap was resized")
    resident.mark(key, path if os.path.exists(path) else FAILED)
    return obj


def _compile_plain_after_failed_create(key: str, compile_unit: Callable[..., Any]) -> Any:
    """A compile that made a PCH failed: compile without. If that fails too, the error is
    the unit's (NVRTC's own, raised) and the prefix may still get a PCH from another unit;
    otherwise making its PCH is what failed, and it is not tried again in this process."""
    try:
        obj = compile_unit({})
    except Exception as exc:
        resident.mark(key, SEEN)
        raise _UnitError() from exc
    resident.mark(key, FAILED)
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
        resident.touch(key)
    else:
        stats.bump("pch_rejects")
        _refused(key, path, why)
    return obj


def _refused(key: str, path: str, why: str) -> None:
    """The PCH at ``path`` is not to be used again in this process; a stale disk file goes."""
    logger.debug("cuprims: NVRTC did not use the precompiled header %s: %s", path, why)
    origin = resident.refuse(key, path)
    if why == f"#{HEAP_WARNING}":
        heap.heap_lost("NVRTC refused a PCH for its heap address (#20282)")
    elif origin is not None:
        store, disk_key, ident = origin
        store.drop(disk_key, ident)
