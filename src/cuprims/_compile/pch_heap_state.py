"""This process's NVRTC precompiled-header heap: its size, set once before it is mapped;
its mapping, made once, at the fixed address of :mod:`.pch_heap` where persistent PCHs
are wanted; and whether PCHs made here may still persist (lost when NVRTC refuses a PCH for
its heap address, or when other code resizes the heap).

While one thread places the heap, our other compiles wait (at most :data:`PLACE_WAIT` s)
rather than start NVRTC, whose arenas and libraries would be mapped in the window.
:func:`heap_status` is what ``cache_info()["pch_heap"]`` shows.
"""

from __future__ import annotations

import os
import threading

from cuprims._base import stats
from cuprims._base.log import logger
from cuprims._compile import pch_heap, pch_resident

# Set once, before the heap is mapped: resizing it later would invalidate every PCH made
# before (NVRTC checks the heap address a PCH was made at).
HEAP_BYTES = 1 << 30
PLACE_WAIT = 2.0

_heap_size_set = False
_heap_mapped = False                     # NVRTC's heap exists (or is about to): placed once
_heap_address: int | None = None         # where it was placed (persistent PCHs usable)
_heap_note = "not mapped yet"
_placing = threading.Event()
_placed = threading.Event()


def heap_status() -> str:
    """Where this process's PCHs live: what ``cache_info()["pch_heap"]`` shows."""
    if _heap_address is not None:
        return f"placed at {_heap_address:#x}: PCHs persist in the disk cache"
    return _heap_note


def heap_address() -> int | None:
    """Where the heap was placed; None while persistent PCHs are not usable here."""
    return _heap_address


def heap_mapped() -> bool:
    """Whether NVRTC's heap exists (or is about to): it is mapped once."""
    return _heap_mapped


def wait_if_placing() -> None:
    """Wait (at most :data:`PLACE_WAIT` s) while another thread places the heap."""
    if _placing.is_set():
        _placed.wait(PLACE_WAIT)


def wait_for_placement() -> None:
    """Wait (at most :data:`PLACE_WAIT` s) for the heap's placement, which the holder of
    the PCH lock is (about to be) making."""
    _placed.wait(PLACE_WAIT)


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
    path = os.path.join(pch_resident.temp_dir(), "heap.pch")
    try:
        _raw_compile(b"int cuprims_pch_heap;\n", [f"--create-pch={path}".encode(), b"--pch-messages=false"])
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


def map_heap(place: bool) -> None:
    """Set the heap's size and, with ``place``, map it at the fixed address (the caller
    holds :mod:`.pch`'s compile lock). Only the first call does anything."""
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


def heap_lost(why: str) -> None:
    """Persistent PCHs stop in this process (``why`` is what :func:`heap_status` says)."""
    global _heap_address, _heap_note
    if _heap_address is not None:
        logger.debug("cuprims: persistent PCHs stop in this process: %s", why)
    _heap_address = None
    _heap_note = f"within the process only: {why}"


def heap_resized() -> bool:
    """Whether other code in the process resized NVRTC's heap since it was set."""
    try:
        _, size = _nvrtc().nvrtcGetPCHHeapSize()
    except Exception:  # noqa: BLE001
        return False
    return int(size) != HEAP_BYTES
