"""Placing NVRTC's precompiled-header heap at one fixed virtual address (Linux only).

An NVRTC PCH is a snapshot of NVRTC's PCH heap; another process can use it only if its
own heap lies at the same address (else NVRTC warns "#20282-D: incompatible precompiled
header (PCH) heap allocation address" and compiles without it). NVRTC maps that heap
with ``mmap(NULL, size, ...)`` at the first compile that names a PCH option (setting its
size and plain compiles map nothing), and Linux's default top-down layout puts an
anonymous mapping at the top of the highest free gap below ``mmap_base`` that fits.

:func:`place_heap` therefore, with ASLR on and without LD_PRELOAD:

1. checks that ``[target - SLACK, target + size)`` is free (a CUDA context, a sanitizer,
   another library may hold it: then nothing is placed and the caller falls back);
2. reserves every free gap of half the heap's size or more above ``target + size`` (up
   to a margin below the main stack) with ``PROT_NONE | MAP_NORESERVE`` mappings that
   commit no memory, leaving :data:`DECOYS` free *decoy* gaps of :data:`DECOY` bytes
   (between reserved guards) above the hole: what other threads map during the window
   (glibc's 64 MiB thread arenas, a library such as nvJitLink or llvmlite loading) lands
   there or in the small gaps left between mappings, while the heap, larger than any of
   them, lands at ``target``. A reservation that fails because another thread mapped
   into its gap meanwhile is retried on the gap's remains (the maps are read again).
   One 256 MiB decoy was not enough: six threads starting NVRTC and nvJitLink at once
   filled it within the window and the heap landed below their arenas; a numba import
   in the main thread mapping into the big gap being reserved left that gap open;
3. runs ``trigger()`` (a tiny ``--create-pch`` compile that maps the heap);
4. checks that a new read-write mapping of at least ``size`` bytes starts at ``target``,
   then releases the reservations (always, also on errors).

A miss is reported, never repaired: the bottom-up layout (``ulimit -s unlimited``), an
address-space limit (``ulimit -v``) too small for the reservations, a heap NVRTC had
mapped before, or a thread that maps a large region at the wrong moment all leave the
heap elsewhere, and the caller keeps precompiled headers within the process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Callable

#: Candidate heap addresses, tried in order; the one a process gets is part of every
#: persistent PCH's key. 32 TiB lies between where Linux puts a PIE executable and its
#: brk heap (~85 TiB) and the mmap area (~127 TiB), where nothing maps by default.
TARGETS = (0x200000000000,)
SLACK = 2 << 20           # free space kept below the heap, checked free too
DECOY = 512 << 20         # each free gap left above the hole for other threads' mmaps (< the heap)
DECOYS = 32               # how many (16 GiB of address space; nothing is committed)
GUARD = 2 << 20           # reserved between the hole and a decoy, and between decoys
STACK_MARGIN = 1 << 30    # nothing is reserved this close below the main stack
_USER_TOP = 1 << 47       # the top of x86-64's mmap window (used when there is no [stack] line)
_ROUNDS = 8

_PROT_NONE = 0
_MAP_PRIVATE, _MAP_ANONYMOUS, _MAP_NORESERVE, _MAP_FIXED_NOREPLACE = 0x02, 0x20, 0x4000, 0x100000
_MAP_FAILED = ctypes.c_void_p(-1).value


@functools.lru_cache(maxsize=None)
def _libc():
    # PyDLL: the calls keep the GIL. Each is a quick syscall, and placing the heap makes ~70
    # of them; through CDLL each would hand the GIL back and, while another thread runs
    # Python (numba compiling the user's kernel beside a coop build), wait a switch
    # interval to take it again: 0.41 s instead of 0.03 s, measured on the 2-core machine.
    libc = ctypes.PyDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.read.restype = ctypes.c_ssize_t
    libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _maps_text() -> str:
    """``/proc/self/maps``, read through libc with the GIL kept: the kernel hands it out a
    page at a time (~30 reads with numba loaded), and each read through Python's file
    objects would hand the GIL back (see :func:`_libc`)."""
    libc = _libc()
    fd = os.open("/proc/self/maps", os.O_RDONLY)
    try:
        buf = ctypes.create_string_buffer(1 << 16)
        chunks = []
        while True:
            n = libc.read(fd, buf, len(buf))
            if n < 0:
                raise OSError(ctypes.get_errno(), "cannot read /proc/self/maps")
            if n == 0:
                break
            chunks.append(ctypes.string_at(buf, n))
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(fd)


def mappings() -> list[tuple[int, int, str, str]]:
    """This process's mappings from ``/proc/self/maps``: (start, end, perms, path or "")."""
    out = []
    for line in _maps_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out.append((lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""))
    out.sort()
    return out


def heap_at(address: int, size: int) -> bool:
    """Whether a read-write anonymous mapping of at least ``size`` bytes starts at ``address``."""
    return any(lo == address and hi - lo >= size and perms.startswith("rw") and not name
               for lo, hi, perms, name in mappings())


def _free_gaps(maps: list[tuple[int, int, str, str]], above: int) -> list[tuple[int, int]]:
    """The unmapped ranges above ``above``, up to :data:`STACK_MARGIN` below the main stack."""
    # the main stack sits at the top of the mmap window (47 bits on x86-64, 48 on aarch64)
    stack = min((lo for lo, _, _, name in maps if name == "[stack]"), default=_USER_TOP + STACK_MARGIN)
    top = stack - STACK_MARGIN
    gaps, cursor = [], above
    for lo, hi, _, _ in maps:
        if hi <= cursor:
            continue
        if lo >= top:
            break
        if lo > cursor:
            gaps.append((cursor, lo))
        cursor = max(cursor, hi)
    if cursor < top:
        gaps.append((cursor, top))
    return gaps


def _decoys(gaps: list[tuple[int, int]], decoy: int) -> list[tuple[int, int]]:
    """:data:`DECOYS` ranges of ``decoy`` bytes, carved from the lowest gaps, each with a
    :data:`GUARD` on both sides (so that no two decoys merge into one larger gap)."""
    out: list[tuple[int, int]] = []
    for lo, hi in gaps:
        while len(out) < DECOYS and hi - lo >= GUARD + decoy + GUARD:
            out.append((lo + GUARD, lo + GUARD + decoy))
            lo += GUARD + decoy
        if len(out) == DECOYS:
            break
    return out


def _minus(gaps: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``gaps`` without the ranges in ``holes`` (both sorted, non-overlapping)."""
    out = []
    for lo, hi in gaps:
        for a, b in holes:
            if b <= lo or a >= hi:
                continue
            if a > lo:
                out.append((lo, a))
            lo = max(lo, b)
        if lo < hi:
            out.append((lo, hi))
    return out


def place_heap(size: int, trigger: Callable[[], None], targets: tuple[int, ...] = TARGETS) -> tuple[int | None, str]:
    """Run ``trigger()`` (which makes NVRTC map its ``size``-byte PCH heap) so that the heap
    lands at the first free address of ``targets``: ``(address, "")`` if it did, else
    ``(None, why not)``. ``trigger`` runs at most once."""
    if not sys.platform.startswith("linux"):
        return None, "not Linux"
    try:
        maps = mappings()
    except OSError as exc:
        return None, f"cannot read /proc/self/maps: {exc}"
    for target in targets:
        lo, hi = target - SLACK, target + size
        busy = [(a, b) for a, b, _, _ in maps if a < hi and b > lo]
        if not busy:
            break
    else:
        a, b = busy[0]
        return None, f"the heap address is taken ({a:#x}-{b:#x})"
    # A free gap of ``big`` bytes or more above the hole could take the heap: each is
    # reserved, less the decoys and with the guards around them; smaller gaps between
    # mappings stay free (decoys of their own).
    big = size // 2
    decoys = _decoys(_free_gaps(maps, target + size), min(DECOY, big - 2 * GUARD))
    libc = _libc()
    reserved: list[tuple[int, int]] = []
    try:
        # Another thread may map (into a gap being reserved, which then fails) or unmap
        # meanwhile: look again until every large gap is reserved.
        for _ in range(_ROUNDS):
            open_gaps = [(a, b) for a, b in _minus(_free_gaps(maps, target + size), decoys)
                         if b - a >= big or any(b == d0 or a == d1 for d0, d1 in decoys)]   # guards too
            if not open_gaps:
                break
            for a, b in open_gaps:
                got = libc.mmap(a, b - a, _PROT_NONE,
                                _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE | _MAP_FIXED_NOREPLACE, -1, 0)
                if got in (None, _MAP_FAILED):
                    continue   # taken meanwhile (looked at again), or refused (an address-space limit)
                if got != a:   # a kernel without MAP_FIXED_NOREPLACE treated it as a hint
                    libc.munmap(got, b - a)
                    continue
                reserved.append((a, b))
            maps = mappings()
        else:
            return None, "the address space above the heap could not be reserved"
        trigger()
        placed = heap_at(target, size)
    finally:
        for a, b in reserved:
            libc.munmap(a, b - a)
    if placed:
        return target, ""
    return None, "the heap was mapped elsewhere (another layout, or a mapping made meanwhile)"
