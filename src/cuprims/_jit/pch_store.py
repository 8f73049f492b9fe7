"""Precompiled headers in the disk cache: entries of kind ``pch``.

An entry is two files in ``<root>/v2/pch/<key[:2]>/``:

* ``<key>``: the PCH exactly as NVRTC wrote it (NVRTC reads it by path, so it cannot be
  framed like the other entries). It is the entry :mod:`.cache_lifecycle` counts in the
  size cap, evicts by last use and lists in ``python -m cuprims cache info``. Uncompressed:
  a reduce prefix's PCH is ~150 MB and decompressing it would cost more than it saves.
* ``<key>.meta``: its sidecar, a framed record (:mod:`.cache_entries`, bound to the kind
  and key) holding the file's size and a CRC-32 of each 32 MiB part, and for people the heap address and
  NVRTC it was made for.

NVRTC checks neither a checksum nor its headers' contents: a damaged PCH can crash the
process (SIGSEGV/SIGBUS) and a stale one is used silently. Hence:

* the key (:func:`pch_key`) covers everything the PCH depends on: the header prefix and
  the compile options (arch, include paths and their locations, defines), our kernel
  templates and sources (``toolchain_fingerprint``), the CCCL release and the NVRTC
  library actually loaded (file sizes and mtimes of ``libnvrtc``/``libnvrtc-builtins``),
  the heap's address and size;
* before use the file is opened (no symlink, a regular file of ours), its size compared
  with the sidecar's and its parts' CRC-32s computed on threads (~0.02 s for 150 MB
  on 16 cores); NVRTC is then handed
  ``/proc/self/fd/N`` of that very open file, so a file replaced or evicted meanwhile is
  never the one it reads. Files are never written in place: NVRTC writes a fresh
  temporary file in the (private, 0700) leaf directory, which is made 0600, summed, its
  sidecar written, and renamed over ``<key>``. A file that fails a check is deleted with
  its sidecar and counted in ``disk_corrupt_discarded``.

Size rules: no PCH is written unless the cap's quarter is at least
:data:`MIN_ENTRY_CAP` (caps under 1 GiB keep PCHs in the process only, so small caps
never churn); one larger than a quarter of the cap is used in the process only; all PCHs
together keep to half the cap (the least recently used go first), so they never push out
the many small compiled entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import mmap
import os
import zlib
from typing import Any, Mapping

from .cache_entries import decode_entry, encode_entry
from .cache_lifecycle import SIDECAR
from .disk_cache import DiskCache
from .private_files import (TEMP_SUFFIX, RejectedFile, UnsafeDirectory, ident_of, logger, open_regular_file,
                            read_regular_file, remove_if_same, write_file_atomic)

KIND = "pch"
FORMAT = 2                  # 2: a CRC-32 per PART_BYTES part (1: one CRC-32)
ENTRY_SHARE = 4             # one PCH is kept only if it is at most cap / 4
KIND_SHARE = 2              # all PCHs together: at most cap / 2
MIN_ENTRY_CAP = 256 << 20   # cap / 4 must be at least this for PCHs to be written at all
_SIDECAR_LIMIT = 64 << 10
_FILE_LIMIT = 4 << 30       # a PCH is never larger than NVRTC's heap
PART_BYTES = 32 << 20      # the sidecar holds a CRC-32 per part of this many bytes (summed in parallel)


def wanted(max_bytes: int) -> bool:
    """Whether a disk cache capped at ``max_bytes`` keeps PCHs."""
    return max_bytes // ENTRY_SHARE >= MIN_ENTRY_CAP


@functools.lru_cache(maxsize=None)
def nvrtc_identity() -> str:
    """The NVRTC library this process uses: its version and the size and mtime of its
    files (``libnvrtc`` as mapped, and the ``libnvrtc-builtins`` beside it). A PCH is valid
    only for the very build that made it (NVRTC #626 otherwise)."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()   # loads the library if nothing did yet
    parts = [f"{major}.{minor}"]
    from .pch_heap import mappings

    libs = sorted({name for _, _, _, name in mappings() if os.path.basename(name).startswith("libnvrtc.so")})
    for lib in libs:
        for path in [lib] + sorted(glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins*.so*"))):
            st = os.stat(path)
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


@functools.lru_cache(maxsize=None)
def headers_identity(include_dirs: tuple[str, ...]) -> str:
    """Version markers of the include directories: CCCL's ``version.h`` and the CUDA
    headers' ``cuda_fp16.h`` (size and mtime), besides the CCCL wheel's version."""
    from .toolchain import _wheel_version

    parts = [str(_wheel_version("nvidia-cuda-cccl", "nvidia-cuda-cccl-cu12"))]
    for d in include_dirs:
        for marker in ("cuda/std/__cccl/version.h", "cuda_fp16.h"):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(d, marker))
                parts.append(f"{marker}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


def pch_key(prefix: str, options: Mapping[str, Any], heap_address: int, heap_bytes: int) -> str:
    """The disk key of the PCH of ``prefix`` compiled with ``options`` (arch, include paths,
    defines, ...) for a heap at ``heap_address``."""
    from .toolchain import toolchain_fingerprint

    includes = options.get("include_path") or ()
    h = hashlib.sha256()
    for part in ("pch", str(FORMAT), toolchain_fingerprint(), nvrtc_identity(),
                 headers_identity(tuple(str(d) for d in includes)), f"{heap_address:#x}", str(heap_bytes),
                 repr(sorted(options.items(), key=lambda kv: kv[0])), prefix):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def crc32_of(fd: int, size: int) -> list[int] | None:
    """The CRC-32 of each :data:`PART_BYTES` part of the ``size`` bytes of the file open as
    ``fd`` (read from offset 0), or None if it holds fewer or more.

    The parts are summed on threads over one read-only mapping of the file: zlib releases
    the GIL for each part's whole computation, so a 141 MB PCH (5 parts) should take about a
    fifth of the ~0.09 s one call took on the H200 host (not measured there yet: 0.033 s
    against 0.051 s on the 2-core machine). Parts are large so that the GIL hand-backs stay
    few: each costs a switch interval to a thread waiting while another runs Python (a coop
    provider checks its PCH on a build thread while numba compiles the user's kernel; beside
    a busy Python loop on the 2-core machine, 0.08-0.10 s here against 0.08 s for one call).
    A file that cannot be mapped is read in parts."""
    try:
        if os.fstat(fd).st_size != size:
            return None
        if size:
            with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
                def part_crc(start: int) -> int:
                    with view[start:start + PART_BYTES] as part:   # released before the mapping closes
                        return zlib.crc32(part)

                starts = range(0, size, PART_BYTES)
                workers = min(len(starts), os.cpu_count() or 1, 8)
                if workers < 2:
                    return [part_crc(start) for start in starts]
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cuprims-pch-crc") as pool:
                    return list(pool.map(part_crc, starts))
    except (OSError, ValueError):
        pass
    os.lseek(fd, 0, os.SEEK_SET)
    buf = bytearray(min(PART_BYTES, max(size, 1)))
    view, crcs, total = memoryview(buf), [], 0
    while True:
        filled = 0   # a part is summed whole: a short read must not move the part boundaries
        while filled < len(buf):
            n = os.readv(fd, [view[filled:]])
            if not n:
                break
            filled += n
        if not filled:
            break
        crcs.append(zlib.crc32(view[:filled]))
        total += filled
        if total > size:
            return None
        if filled < len(buf):
            break
    return crcs if total == size else None


@dataclasses.dataclass
class Pending:
    """A PCH being written: NVRTC writes ``path`` (``tmp`` in the open leaf directory)."""

    key: str
    stack: contextlib.ExitStack
    leaf: int
    tmp: str

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.leaf}/{self.tmp}"


class PchStore:
    """The ``pch`` entries of one disk cache."""

    def __init__(self, cache: DiskCache):
        self.cache = cache
        self.max_entry = (cache.max_bytes // ENTRY_SHARE) if cache.max_bytes is not None else _FILE_LIMIT

    # ------------------------------------------------------------------ reading
    def load(self, key: str) -> tuple[int, tuple[int, int]] | None:
        """``(fd, ident)`` of the verified PCH of ``key`` (the caller keeps the fd open for as
        long as NVRTC may read it), or None: absent, or damaged (then deleted)."""
        side = key + SIDECAR
        with contextlib.ExitStack() as stack:
            try:
                leaf = self.cache.open_leaf(stack, KIND, key, create=False)
            except FileNotFoundError:
                return None
            except (UnsafeDirectory, OSError) as exc:
                self.cache.note_unusable(exc, "cannot open the pch directory")
                return None
            try:
                raw, side_ident = read_regular_file(leaf, side, _SIDECAR_LIMIT)
            except FileNotFoundError:
                return None   # nothing there (or a writer between its two renames)
            except RejectedFile as exc:
                self._discard(leaf, key, exc.ident, _ident(leaf, key), f"sidecar: {exc}")
                return None
            except OSError:
                return None
            try:
                meta = _checked_meta(decode_entry(raw, kind=KIND, key=key)[0])
            except ValueError as exc:
                self._discard(leaf, key, side_ident, _ident(leaf, key), f"sidecar: {exc}")
                return None
            try:
                fd, st = open_regular_file(leaf, key, _FILE_LIMIT)
            except FileNotFoundError:
                return None   # evicted, or a crashed writer's sidecar: left for the debris sweep
            except RejectedFile as exc:
                self._discard(leaf, key, side_ident, exc.ident, str(exc))
                return None
            except OSError:
                return None
            try:
                if st.st_size != meta["bytes"]:
                    problem = f"{st.st_size} bytes, its sidecar says {meta['bytes']}"
                elif crc32_of(fd, meta["bytes"]) != meta["crc32"]:
                    problem = "checksum mismatch"
                else:
                    os.lseek(fd, 0, os.SEEK_SET)
                    problem = None
            except OSError as exc:
                problem = f"cannot read it: {exc}"
            if problem is not None:
                os.close(fd)
                self._discard(leaf, key, side_ident, ident_of(st), problem)
                return None
        self.cache.record_use(KIND, key)
        return fd, ident_of(st)

    @staticmethod
    def _discard(leaf: int, key: str, side_ident, data_ident, reason: str) -> None:
        from . import stats

        logger.debug("cuprims: discarding precompiled header %s: %s", key, reason)
        stats.bump("disk_corrupt_discarded")
        remove_if_same(leaf, key, data_ident)
        remove_if_same(leaf, key + SIDECAR, side_ident)

    def drop(self, key: str, ident: tuple[int, int]) -> None:
        """Delete the entry of ``key`` if its file is still ``ident`` (NVRTC refused it)."""
        with contextlib.ExitStack() as stack:
            try:
                leaf = self.cache.open_leaf(stack, KIND, key, create=False)
            except OSError:
                return
            if _ident(leaf, key) == ident:
                remove_if_same(leaf, key + SIDECAR, _ident(leaf, key + SIDECAR))
                remove_if_same(leaf, key, ident)

    # ------------------------------------------------------------------ writing
    def begin(self, key: str) -> Pending:
        """A temporary path in the entry's (created, checked) leaf directory for NVRTC's
        ``--create-pch``. Raises UnsafeDirectory or OSError when the cache cannot be written."""
        stack = contextlib.ExitStack()
        try:
            leaf = self.cache.open_leaf(stack, KIND, key, create=True)
        except BaseException:
            stack.close()
            raise
        return Pending(key, stack, leaf, f".{key}.{os.urandom(8).hex()}{TEMP_SUFFIX}")

    def discard(self, pending: Pending) -> None:
        """Remove what NVRTC wrote under the temporary name (if anything) and close the leaf."""
        with contextlib.suppress(OSError):
            os.unlink(pending.tmp, dir_fd=pending.leaf)
        pending.stack.close()

    def publish(self, pending: Pending, meta: dict[str, Any], *, keep: bool = True) -> tuple[int | None, bool]:
        """Check what NVRTC wrote and, with ``keep`` and within the size rules, make it the
        entry (sidecar first, then the file renamed over ``<key>``). Returns ``(fd, stored)``:
        an open fd of the file for this process's compiles (None if NVRTC wrote nothing
        usable) and whether it is now in the cache. The temporary name is gone either way."""
        key, leaf, tmp = pending.key, pending.leaf, pending.tmp
        try:
            try:
                fd, st = open_regular_file(leaf, tmp, _FILE_LIMIT)
            except (OSError, RejectedFile):
                return None, False
            try:
                os.fchmod(fd, 0o600)
                crc = crc32_of(fd, st.st_size) if st.st_size else None
                os.lseek(fd, 0, os.SEEK_SET)
            except OSError:
                crc = None
            if crc is None:
                os.close(fd)
                return None, False
            if not keep or st.st_size > self.max_entry:
                if keep:
                    logger.debug("cuprims: precompiled header %s is %d bytes, over a quarter of the cap: "
                                 "used in this process only", key, st.st_size)
                return fd, False
            try:
                record = encode_entry({**meta, "format": FORMAT, "bytes": st.st_size, "crc32": crc}, {},
                                      kind=KIND, key=key)
                write_file_atomic(leaf, key + SIDECAR, record)
                os.replace(tmp, key, src_dir_fd=leaf, dst_dir_fd=leaf)
            except OSError as exc:
                self.cache.note_unusable(exc, "cannot write a precompiled header")
                return fd, False
        finally:
            self.discard(pending)
        if self.cache.max_bytes is not None:
            self.cache.enforce_kind_cap(KIND, self.cache.max_bytes // KIND_SHARE)
            self.cache.enforce_cap(self.cache.max_bytes)
        return fd, True


def _ident(dir_fd: int, name: str) -> tuple[int, int] | None:
    try:
        return ident_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
    except OSError:
        return None


def _checked_meta(meta: dict[str, Any]) -> dict[str, Any]:
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}")
    if type(meta.get("bytes")) is not int or meta["bytes"] < 0:
        raise ValueError("sidecar field bytes")
    if meta["bytes"] == 0:
        raise ValueError("empty PCH")
    crcs = meta.get("crc32")
    if (not isinstance(crcs, list) or len(crcs) != -(-meta["bytes"] // PART_BYTES)
            or not all(type(c) is int and 0 <= c < 1 << 32 for c in crcs)):
        raise ValueError("sidecar field crc32")
    return meta
