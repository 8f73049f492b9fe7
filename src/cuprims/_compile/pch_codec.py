"""Precompiled headers packed for the disk and unpacked into memory.

A PCH is mostly zeros, scattered (a reduce prefix's 152 MB: 82% zero bytes but only ~150
whole zero pages, so a sparse file saves nothing). On disk it is kept as zstd frames, one
per :data:`PART_BYTES` part of the PCH, compressed independently so that both packing
and unpacking run on up to :data:`MAX_THREADS` threads (zstandard releases the GIL for
each part's whole computation). Level 1: ~10x over our PCHs (1414 MB -> 138 MB for the
demo's twelve); levels 2-3 gave 1-2% more for 10-25% more time, 5-6 less than 10% more
for 3-4x the time. Parts of 16 or 32 MiB pack alike (10.21x against 10.22x); 16 MiB
balances two threads better.

NVRTC reads a PCH by path and maps it, so a PCH is unpacked into a *memory file*: an
anonymous one (``memfd_create``), sealed once written (no write, shrink or growth: a
truncated PCH would make NVRTC's process die of SIGBUS), handed to NVRTC as
``/proc/self/fd/N``. Where memory files are unavailable it is a file in the caller's
private directory, unlinked as soon as it is created.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import Callable, Iterable, TypeVar

PART_BYTES = 16 << 20   # a PCH is packed in frames of this many bytes each (the last one shorter)
LEVEL = 1               # zstd compression level
MAX_THREADS = 8
_T = TypeVar("_T")


class Damaged(Exception):
    """Packed data that does not unpack to what its description says."""


def available() -> bool:
    """Whether zstandard can be imported (without it PCHs stay within the process)."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def part_sizes(size: int) -> list[int]:
    """The sizes of the parts of a ``size``-byte PCH: one frame each."""
    return [min(PART_BYTES, size - start) for start in range(0, size, PART_BYTES)]


def _on_threads(work: Callable[[int], _T], items: Iterable[int]) -> list[_T]:
    items = list(items)
    workers = min(len(items), os.cpu_count() or 1, MAX_THREADS)
    if workers < 2:
        return [work(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cuprims-pch-codec") as pool:
        return list(pool.map(work, items))


# ---------------------------------------------------------------------------- memory files
def memory_file(size: int, dir_fd: int) -> int:
    """An fd (read-write, close-on-exec) of a new ``size``-byte file that nothing else
    names: an anonymous memory file that can be sealed, else a file created 0600 in the
    private directory ``dir_fd`` and unlinked at once."""
    fd = None
    create = getattr(os, "memfd_create", None)
    if create is not None:
        try:
            fd = create("cuprims-pch", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError:
            fd = None
    if fd is None:
        fd = _unlinked_file(dir_fd)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlinked_file(dir_fd: int) -> int:
    from cuprims._cache.files import TEMP_SUFFIX

    flags = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    for _ in range(8):
        name = f".pch.{os.urandom(8).hex()}{TEMP_SUFFIX}"
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        os.unlink(name, dir_fd=dir_fd)
        return fd
    raise FileExistsError("no free temporary name")  # pragma: no cover - eight collisions of 64 random bits


def seal(fd: int) -> bool:
    """Forbid every later write, shrink and growth of the memory file ``fd`` (and further
    seals); whether it is sealed (a plain file cannot be)."""
    import fcntl

    seals = getattr(fcntl, "F_SEAL_WRITE", 0) | getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(fcntl, "F_SEAL_GROW", 0)
    if not seals or not hasattr(fcntl, "F_ADD_SEALS"):
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | fcntl.F_SEAL_SEAL)
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------------- packing
def pack(fd: int, size: int, copy_to: int | None = None) -> list[bytes]:
    """The zstd frames of the ``size`` bytes of the file ``fd``, one per part, compressed on
    threads; with ``copy_to`` (a file of ``size`` bytes) each part is also written there at
    its offset. Raises OSError when the file cannot be read or written."""
    import zstandard

    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
        def one(start: int) -> bytes:
            with view[start:start + PART_BYTES] as part:   # released before the mapping closes
                frame = zstandard.ZstdCompressor(level=LEVEL, write_content_size=True).compress(part)
                if copy_to is not None:
                    _pwrite_all(copy_to, part, start)
            return frame

        return _on_threads(one, range(0, size, PART_BYTES))


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        n = os.pwrite(fd, data, offset)
        if not n:
            raise OSError("wrote nothing")
        data, offset = data[n:], offset + n


def unpack(data: bytes | bytearray | memoryview, frames: list[int], size: int, out_fd: int) -> None:
    """Unpack ``data``, the concatenated frames of sizes ``frames``, into the ``size``-byte
    file ``out_fd``, the frames on threads. Raises :class:`Damaged` unless every frame
    holds exactly its part (frame ``i`` the bytes from ``i * PART_BYTES``), OSError when
    the file cannot be written.

    Each thread unpacks a part into a buffer of its own, then writes that into the file:
    writing a memory file takes pages for it without faulting them in one by one
    (unpacking straight into a shared mapping of it took ~0.03-0.05 s more for 152 MB on
    the 2-core machine), and parts are large so that the GIL is handed back rarely (beside
    a busy Python thread each return waits for a switch interval)."""
    import zstandard

    parts = part_sizes(size)
    if len(parts) != len(frames) or sum(frames) != len(data):
        raise Damaged(f"{len(frames)} frames of {sum(frames)} bytes for {len(parts)} parts in {len(data)} bytes")
    offsets = [0]
    for n in frames:
        offsets.append(offsets[-1] + n)
    buffers = threading.local()

    def one(i: int) -> None:
        want, start = parts[i], i * PART_BYTES
        buf = getattr(buffers, "view", None)
        if buf is None:
            buf = buffers.view = memoryview(bytearray(min(PART_BYTES, size)))
        with source[offsets[i]:offsets[i + 1]] as frame:
            try:
                if zstandard.frame_content_size(frame) != want:
                    raise Damaged(f"frame {i} does not hold {want} bytes")
                # the reader holds the frame's buffer until it is closed
                with zstandard.ZstdDecompressor().stream_reader(frame, read_across_frames=False) as reader:
                    got = 0
                    while got < want:
                        with buf[:min(len(buf), want - got)] as chunk:
                            n = reader.readinto(chunk)
                            if not n:
                                raise Damaged(f"frame {i} ends after {got} of its {want} bytes")
                            with chunk[:n] as filled:
                                _pwrite_all(out_fd, filled, start + got)
                        got += n
                    if reader.read(1):
                        raise Damaged(f"frame {i} holds more than its {want} bytes")
            except zstandard.ZstdError as exc:
                raise Damaged(f"frame {i}: {exc}") from None

    with memoryview(data) as source:
        _on_threads(one, range(len(parts)))
