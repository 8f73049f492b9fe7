"""Precompiled headers in the disk cache: entries of kind ``pch``.

An entry is two files in ``<root>/v2/pch/<key[:2]>/``:

* ``<key>``: the PCH packed by :mod:`.pch_codec`: zstd frames, one per 16 MiB part
  (~10x smaller: a reduce prefix's 152 MB PCH takes 15 MB). It is the entry
  :mod:`.cache_lifecycle` counts in the size cap (by its bytes on disk), evicts by last
  use and lists in ``python -m cuprims cache info``.
* ``<key>.meta``: its sidecar, a framed record (:mod:`.cache_entries`, bound to the kind
  and key) holding the PCH's size, each frame's size and a CRC-32 of the whole entry, and
  for people the heap address and NVRTC it was made for.

NVRTC checks neither a checksum nor its headers' contents: a damaged PCH can crash the
process (SIGSEGV/SIGBUS) and a stale one is used silently. Hence:

* the key (:func:`pch_key`) covers everything the PCH depends on: the header prefix and
  the compile options (arch, include paths and their locations, defines), our kernel
  templates and sources (``toolchain_fingerprint``), the CCCL release and the NVRTC
  library actually loaded (file sizes and mtimes of ``libnvrtc``/``libnvrtc-builtins``),
  the heap's address and size, and :data:`FORMAT`;
* before use the entry is opened (no symlink, a regular file of ours), its size compared
  with the sidecar's, read whole and its CRC-32 checked; only then is it unpacked, each
  frame on a thread, into a sealed memory file of this process (every frame must give
  exactly its part), and NVRTC is handed ``/proc/self/fd/N`` of that memory file: nothing
  another process does to the cache reaches what NVRTC reads. Entries are never written
  in place: NVRTC writes the PCH to a fresh temporary file in the (private, 0700) leaf
  directory, which is packed (and copied into a memory file for this process's own
  compiles) and removed; the sidecar is written, then the packed entry atomically. An
  entry that fails a check is deleted with its sidecar and counted in
  ``disk_corrupt_discarded``.

Size rules (bytes on disk): no PCH is written unless the cap's quarter is at least
:data:`MIN_ENTRY_CAP` (caps under 1 GiB keep PCHs in the process only, so small caps
never churn); one whose entry is larger than a quarter of the cap is used in the process
only; all PCH entries together keep to half the cap (the least recently used go first),
so they never push out the many small compiled entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import os
import zlib
from typing import Any, Mapping

from cuprims._cache.disk import DiskCache
from cuprims._cache.entries import PCH_KIND, decode_entry, encode_entry
from cuprims._cache.files import (TEMP_SUFFIX, RejectedFile, UnsafeDirectory, ident_of, logger, open_regular_file,
                                  read_regular_file, remove_if_same, write_file_atomic)
from cuprims._cache.lifecycle import SIDECAR
from cuprims._compile import pch_codec

KIND = PCH_KIND
FORMAT = 3                  # 3: zstd frames per part (2: the raw PCH, a CRC-32 per part; 1: one CRC-32)
ENTRY_SHARE = 4             # one PCH is kept only if it is at most cap / 4
KIND_SHARE = 2              # all PCHs together: at most cap / 2
MIN_ENTRY_CAP = 256 << 20   # cap / 4 must be at least this for PCHs to be written at all
_SIDECAR_LIMIT = 64 << 10
_FILE_LIMIT = 4 << 30       # a PCH is never larger than NVRTC's heap


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
    from cuprims._compile.pch_heap import mappings

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
    from cuprims._compile.toolchain import wheel_version

    parts = [str(wheel_version("nvidia-cuda-cccl", "nvidia-cuda-cccl-cu12"))]
    for d in include_dirs:
        for marker in ("cuda/std/__cccl/version.h", "cuda_fp16.h"):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(d, marker))
                parts.append(f"{marker}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


def pch_key(prefix: str, options: Mapping[str, Any], heap_address: int, heap_bytes: int) -> str:
    """The disk key of the PCH of ``prefix`` compiled with ``options`` (arch, include paths,
    defines, ...) for a heap at ``heap_address``."""
    from cuprims._compile.toolchain import toolchain_fingerprint

    includes = options.get("include_path") or ()
    h = hashlib.sha256()
    for part in ("pch", str(FORMAT), toolchain_fingerprint(), nvrtc_identity(),
                 headers_identity(tuple(str(d) for d in includes)), f"{heap_address:#x}", str(heap_bytes),
                 repr(sorted(options.items(), key=lambda kv: kv[0])), prefix):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


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
        """``(fd, ident)``: ``fd`` a sealed memory file holding the verified, unpacked PCH of
        ``key`` (the caller keeps it open for as long as NVRTC may read it, and closes it),
        ``ident`` the entry's file; or None: absent, or damaged (then deleted)."""
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
                out = self._unpacked(leaf, key, fd, st.st_size, meta)
            except pch_codec.Damaged as exc:
                self._discard(leaf, key, side_ident, ident_of(st), str(exc))
                return None
            finally:
                os.close(fd)
            if out is None:
                return None
        self.cache.record_use(KIND, key)
        return out, ident_of(st)

    @staticmethod
    def _unpacked(leaf: int, key: str, fd: int, size: int, meta: dict[str, Any]) -> int | None:
        """A sealed memory file holding the PCH that the ``size``-byte entry file ``fd``
        packs, checked against its sidecar's ``meta`` before it is unpacked; None when no
        memory file can be had now (the entry stays). Raises :class:`pch_codec.Damaged`."""
        if size != sum(meta["frames"]):
            raise pch_codec.Damaged(f"{size} bytes, its sidecar says {sum(meta['frames'])}")
        try:
            packed = _read_exactly(fd, size)
        except OSError as exc:
            raise pch_codec.Damaged(f"cannot read it: {exc}") from None
        if packed is None:
            raise pch_codec.Damaged("its size changed while it was read")
        if zlib.crc32(packed) != meta["crc32"]:
            raise pch_codec.Damaged("checksum mismatch")
        try:
            out = pch_codec.memory_file(meta["bytes"], leaf)
        except OSError as exc:   # no memory or descriptors for it now: a miss
            logger.debug("cuprims: no memory file for precompiled header %s: %s", key, exc)
            return None
        try:
            pch_codec.unpack(packed, meta["frames"], meta["bytes"], out)
        except BaseException as exc:
            os.close(out)
            if not isinstance(exc, OSError):
                raise
            logger.debug("cuprims: cannot unpack precompiled header %s: %s", key, exc)
            return None
        pch_codec.seal(out)
        return out

    @staticmethod
    def _discard(leaf: int, key: str, side_ident, data_ident, reason: str) -> None:
        from cuprims._base import stats

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

    def publish(self, pending: Pending, meta: dict[str, Any], *,
                keep: bool = True) -> tuple[int | None, tuple[int, int] | None]:
        """Pack what NVRTC wrote and, with ``keep`` and within the size rules, make it the
        entry (sidecar first, then the packed file written atomically as ``<key>``). Returns
        ``(fd, ident)``: a sealed memory file holding the PCH for this process's compiles
        (None if NVRTC wrote nothing usable) and, if it is now in the cache, the entry's
        file (else None). The temporary file is gone either way."""
        key, leaf, tmp = pending.key, pending.leaf, pending.tmp
        try:
            try:
                raw, st = open_regular_file(leaf, tmp, _FILE_LIMIT)
            except (OSError, RejectedFile):
                return None, None
            out = None
            try:
                if not st.st_size:
                    return None, None
                out = pch_codec.memory_file(st.st_size, leaf)
                frames = pch_codec.pack(raw, st.st_size, copy_to=out)
            except BaseException as exc:
                if out is not None:
                    os.close(out)
                if isinstance(exc, OSError):
                    return None, None
                raise
            finally:
                os.close(raw)
            pch_codec.seal(out)
            packed = b"".join(frames)
            if not keep or len(packed) > self.max_entry:
                if keep:
                    logger.debug("cuprims: precompiled header %s takes %d bytes packed, over a quarter of the cap: "
                                 "used in this process only", key, len(packed))
                return out, None
            try:
                record = encode_entry({**meta, "format": FORMAT, "bytes": st.st_size,
                                       "frames": [len(f) for f in frames], "crc32": zlib.crc32(packed)}, {},
                                      kind=KIND, key=key)
                write_file_atomic(leaf, key + SIDECAR, record)
                write_file_atomic(leaf, key, packed)
                ident = _ident(leaf, key)
            except OSError as exc:
                self.cache.note_unusable(exc, "cannot write a precompiled header")
                return out, None
        finally:
            self.discard(pending)
        if self.cache.max_bytes is not None:
            self.cache.enforce_kind_cap(KIND, self.cache.max_bytes // KIND_SHARE)
            self.cache.enforce_cap(self.cache.max_bytes)
        return out, ident


def _ident(dir_fd: int, name: str) -> tuple[int, int] | None:
    try:
        return ident_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
    except OSError:
        return None


def _read_exactly(fd: int, size: int) -> bytes | None:
    """The ``size`` bytes of the file ``fd`` from offset 0, or None if it holds fewer or more."""
    chunks, total = [], 0
    while total <= size:
        chunk = os.pread(fd, size + 1 - total, total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total != size:
        return None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _checked_meta(meta: dict[str, Any]) -> dict[str, Any]:
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}")
    size = meta.get("bytes")
    if type(size) is not int or not 0 < size <= _FILE_LIMIT:
        raise ValueError("sidecar field bytes")
    frames = meta.get("frames")
    if (not isinstance(frames, list) or len(frames) != len(pch_codec.part_sizes(size))
            or not all(type(n) is int and 0 < n <= _FILE_LIMIT for n in frames)):
        raise ValueError("sidecar field frames")
    crc = meta.get("crc32")
    if type(crc) is not int or not 0 <= crc < 1 << 32:
        raise ValueError("sidecar field crc32")
    return meta
