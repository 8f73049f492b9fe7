"""The two cache levels: an in-memory single-flight LRU and an on-disk artifact store.

In memory, concurrent misses of one key build once: the first caller builds, the others
wait and receive the same result or the same exception; failures are not cached.

On disk, each entry is one file written atomically (a temp file with an unpredictable
name, then ``os.replace``), framed as ``MAGIC | sha256(payload) | len(payload) | payload``.
The payload's JSON header records the entry's kind and full key beside its metadata, so
an entry is only ever served for the key it was written for. The rules:

* Private storage: every directory of the cache is created ``0700``; an existing one is
  used only if it is a real directory (not a symlink) owned by us and not writable by
  group or others. Files are created ``0600`` with ``O_CREAT | O_EXCL | O_NOFOLLOW``
  relative to an already checked directory descriptor; lock files are opened with
  ``O_NOFOLLOW`` and ``0600`` too. Nothing we write follows a symlink.
* Defensive reads: an entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` and accepted only
  if it is a regular file of ours no larger than :data:`MAX_ENTRY_BYTES` (a FIFO, a device
  or a huge sparse file is rejected without being read). Then the checksum, the kind, the
  key and the shape of the header are checked, and the caller may pass a ``validate``
  function for the metadata it consumes. An entry failing any check is deleted, counted in
  ``disk_corrupt_discarded`` and reported as a miss, so it is rebuilt, never loaded.
* Cooperating processes take a per-kind, per-key lock file before building, and look
  again once they hold it, so two processes never compile the same key twice.
* A cache directory that cannot be used (not writable, not a directory, not ours) never
  fails a build: the result is just not kept. The problem is logged once per process and
  directory as a warning on the ``cuprims`` logger and shown by ``cache_info()``'s
  ``disk_status``.

The same private-directory and no-follow helpers write generated sources
(:mod:`cuprims._jit.nvrtc`).

cuda.core.utils has program caches, but they store raw bytes only and refuse
``include_path``/name expressions without a digest we would compute anyway; we need
several artifacts plus metadata per entry and a lock per key, so this module is ours.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import stat
import struct
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator

from . import stats

MAGIC = b"CUPRIMS\x02"
LAYOUT_VERSION = "v2"
OLD_LAYOUTS = ("v1",)   # removed too by DiskCache.clear()

#: Largest entry file read back (bytes). A larger file is rejected without being read:
#: real entries are a few hundred KiB, and the bound keeps a stray huge (or sparse) file
#: from being read into memory.
MAX_ENTRY_BYTES = 256 * 1024 * 1024

logger = logging.getLogger("cuprims")


class SingleFlightLRU:
    """A bounded mapping whose misses are built once, however many threads ask at once."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._inflight: dict[Any, Future] = {}
        self._lock = threading.Lock()

    def get_or_build(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                pass
            else:
                self._data.move_to_end(key)
                stats.bump("memory_hits")
                return value
            future = self._inflight.get(key)
            owner = future is None
            if owner:
                future = Future()
                self._inflight[key] = future
        if not owner:
            stats.bump("memory_hits")
            return future.result()
        stats.bump("memory_misses")
        try:
            value = build()
        except BaseException as exc:
            with self._lock:
                del self._inflight[key]
            future.set_exception(exc)
            raise
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
            del self._inflight[key]
        future.set_result(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


# ----------------------------------------------------------------------------- reporting

_report_lock = threading.Lock()
_status: dict[tuple[str, str], str] = {}
_warned: set[tuple[str, str]] = set()


def report_unusable(what: str, path: Path | str, reason: str) -> None:
    """Record that ``path`` (a ``what``) cannot be used; warn the first time per process."""
    ident = (what, str(path))
    with _report_lock:
        _status[ident] = reason
        first = ident not in _warned
        _warned.add(ident)
    if first:
        if what == "disk cache":
            consequence = ("compiled code is not being cached on disk. Point CUPRIMS_CACHE_DIR at a "
                           "private writable directory, or set CUPRIMS_DISK_CACHE=0")
        else:
            consequence = "generated sources are not being written there"
        logger.warning("cuprims: the %s at %s cannot be used (%s); %s.", what, path, reason, consequence)


def mark_usable(what: str, path: Path | str) -> None:
    with _report_lock:
        _status.pop((what, str(path)), None)


def recorded_problem(what: str, path: Path | str) -> str | None:
    with _report_lock:
        return _status.get((what, str(path)))


# ----------------------------------------------------------------------------- private files

class UnsafeDirectory(Exception):
    """A directory we would write into is not a private directory of ours."""


class RejectedFile(Exception):
    """An entry path holds something that must not be read (carries what it was, for removal)."""

    def __init__(self, reason: str, ident: tuple[int, int] | None):
        super().__init__(reason)
        self.ident = ident


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
# Everything below works relative to checked directory descriptors; without that (and
# without O_NOFOLLOW) nothing is written or read at all.
_SAFE_PLATFORM = (bool(_O_NOFOLLOW) and bool(_O_DIRECTORY) and os.stat in os.supports_follow_symlinks
                  and all(f in os.supports_dir_fd for f in (os.open, os.mkdir, os.stat, os.unlink, os.rename,
                                                            os.chmod)))


def _euid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def _check_dir_fd(fd: int, shown: str) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{shown} is not a directory")
    euid = _euid()
    if euid >= 0 and st.st_uid != euid:
        raise UnsafeDirectory(f"{shown} is owned by uid {st.st_uid}, not by us (uid {euid})")
    if st.st_mode & 0o022:
        raise UnsafeDirectory(f"{shown} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")


def _open_dir(name: str, shown: str, *, dir_fd: int | None = None, create: bool = False) -> int:
    """Open directory ``name`` (relative to ``dir_fd``) without following a symlink, creating
    it 0700 if asked, and check that it is a private directory of ours. Returns its fd."""
    created = False
    while True:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            break
        except FileNotFoundError:
            if not create or created:
                raise
            try:
                os.mkdir(name, 0o700, dir_fd=dir_fd)
            except FileExistsError:
                pass   # someone else made it meanwhile: open and check it
            except OSError as exc:
                raise UnsafeDirectory(f"cannot create {shown}: {exc.strerror or exc}") from None
            created = True
        except PermissionError:
            if not created:
                raise
            # the umask took our own access away from the directory we just made
            os.chmod(name, 0o700, dir_fd=dir_fd)
            created = False
            create = False
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
                except OSError:
                    is_link = False
                raise UnsafeDirectory(f"{shown} is a symbolic link" if is_link
                                      else f"{shown} is not a directory") from None
            raise
    try:
        if created:
            os.fchmod(fd, 0o700)   # exactly 0700, whatever the umask
        _check_dir_fd(fd, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_dir(path: Path, *, create: bool) -> int:
    """An fd for ``path``, a checked private directory of ours (created 0700 with any missing
    parents if ``create``). The parents themselves are followed as they are."""
    path = Path(path)
    if not _SAFE_PLATFORM:  # pragma: no cover - non-POSIX
        raise UnsafeDirectory("this platform cannot open files without following symlinks")
    if create:
        missing = []
        parent = path.parent
        while not os.path.lexists(parent) and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        for p in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(p, 0o700)
    return _open_dir(str(path), str(path), create=create)


def write_file_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``data`` to ``name`` in the directory ``dir_fd``: a fresh 0600 temp file with an
    unpredictable name (``O_EXCL | O_NOFOLLOW``), then renamed over ``name`` (a rename
    replaces a symlink there instead of following it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    for _ in range(8):
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - eight collisions of 64 random bits
        raise FileExistsError(errno.EEXIST, "no free temporary name", name)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _ident(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def read_regular_file(dir_fd: int, name: str, limit: int) -> tuple[bytes, tuple[int, int]]:
    """The bytes of ``name`` in ``dir_fd`` and its (dev, inode), read only if it is a regular
    file of ours no larger than ``limit``; never follows a symlink nor blocks.

    Raises FileNotFoundError when nothing is there, :class:`RejectedFile` when something
    that must not be read is, other OSErrors as they come."""
    try:
        fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR):
            raise
        try:
            ident = _ident(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except OSError:
            ident = None
        reason = "entry is a symbolic link" if exc.errno == errno.ELOOP else describe_error(exc)
        raise RejectedFile(reason, ident) from None
    try:
        st = os.fstat(fd)
        ident = _ident(st)
        if not stat.S_ISREG(st.st_mode):
            raise RejectedFile("entry is not a regular file", ident)
        euid = _euid()
        if euid >= 0 and st.st_uid != euid:
            raise RejectedFile(f"entry is owned by uid {st.st_uid}", ident)
        if st.st_size > limit:
            raise RejectedFile(f"entry is {st.st_size} bytes, over the {limit} byte bound", ident)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(max(st.st_size + 1 - total, 1 << 16), limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise RejectedFile(f"entry grew over the {limit} byte bound", ident)
        return b"".join(chunks), ident
    finally:
        os.close(fd)


def remove_if_same(dir_fd: int, name: str, ident: tuple[int, int] | None) -> None:
    """Unlink ``name`` if it is still the file we looked at (not a fresh entry put since)."""
    if ident is None:
        return
    with contextlib.suppress(OSError):
        if _ident(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) == ident:
            os.unlink(name, dir_fd=dir_fd)


# ----------------------------------------------------------------------------- entries

_HEADER_FIELDS = {"kind", "key", "meta", "blobs"}


def encode_entry(meta: dict[str, Any], blobs: dict[str, bytes], *, kind: str, key: str) -> bytes:
    """Frame metadata (JSON) and named binary blobs into one checksummed record bound to
    ``kind`` and ``key``."""
    names = sorted(blobs)
    header = json.dumps({"kind": kind, "key": key, "meta": meta,
                         "blobs": [[n, len(blobs[n])] for n in names]}, sort_keys=True).encode()
    payload = struct.pack("<Q", len(header)) + header + b"".join(blobs[n] for n in names)
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


def decode_entry(raw: bytes, *, kind: str, key: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Inverse of :func:`encode_entry`; raises ValueError on any damage, on a header of the
    wrong shape and on an entry written for another kind or key."""
    head = len(MAGIC) + 32 + 8
    if len(raw) < head or raw[:len(MAGIC)] != MAGIC:
        raise ValueError("bad magic")
    digest = raw[len(MAGIC):len(MAGIC) + 32]
    (length,) = struct.unpack_from("<Q", raw, len(MAGIC) + 32)
    payload = raw[head:]
    if len(payload) != length:
        raise ValueError("truncated entry")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("checksum mismatch")
    if len(payload) < 8:
        raise ValueError("no header")
    (hlen,) = struct.unpack_from("<Q", payload, 0)
    if hlen > len(payload) - 8:
        raise ValueError("header length out of range")
    try:
        header = json.loads(payload[8:8 + hlen])
    except RecursionError:
        raise ValueError("header nested too deeply") from None
    except ValueError as exc:   # JSONDecodeError, UnicodeDecodeError, an over-long integer
        raise ValueError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or set(header) != _HEADER_FIELDS:
        raise ValueError("header fields")
    if header["kind"] != kind or header["key"] != key:
        raise ValueError("entry belongs to another kind or key")
    if not isinstance(header["meta"], dict):
        raise ValueError("metadata is not an object")
    listed = header["blobs"]
    if not isinstance(listed, list):
        raise ValueError("blob list")
    blobs, pos = {}, 8 + hlen
    for item in listed:
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or type(item[1]) is not int or item[1] < 0 or item[0] in blobs):
            raise ValueError("blob list")
        name, size = item
        blobs[name] = payload[pos:pos + size]
        pos += size
    if pos != len(payload):
        raise ValueError("blob sizes do not add up")
    return header["meta"], blobs


_KIND = re.compile(r"[a-z]+")
_KEY = re.compile(r"[0-9a-f]{2,128}")


class DiskCache:
    """Artifacts on disk under ``root/v2/<kind>/<key[:2]>/<key>``, locks under ``root/v2/locks``."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / LAYOUT_VERSION / kind / key[:2] / key

    @staticmethod
    def _check_names(kind: str, key: str) -> None:
        if not _KIND.fullmatch(kind) or kind == "locks" or not _KEY.fullmatch(key):
            raise ValueError(f"bad cache kind/key: {kind!r}/{key!r}")

    def _open(self, stack: contextlib.ExitStack, parts: tuple[str, ...], *, create: bool) -> int:
        fd = open_private_dir(self.root, create=create)
        stack.callback(os.close, fd)
        shown = self.root
        for part in parts:
            shown = shown / part
            fd = _open_dir(part, str(shown), dir_fd=fd, create=create)
            stack.callback(os.close, fd)
        return fd

    def _unusable(self, exc: BaseException, doing: str) -> None:
        if isinstance(exc, UnsafeDirectory) or not isinstance(exc, OSError):
            reason = str(exc)
        else:
            reason = f"{doing}: {exc.strerror or exc}"
        report_unusable("disk cache", self.root, reason)

    def get(self, kind: str, key: str,
            validate: Callable[[dict[str, Any], dict[str, bytes]], Any] | None = None) -> Any:
        """The entry ``(meta, blobs)`` -- or ``validate(meta, blobs)`` when given -- or None.

        ``validate`` checks the metadata the caller consumes and may convert it; if it
        raises, the entry is treated like a damaged one (removed, counted, a miss)."""
        self._check_names(kind, key)
        with contextlib.ExitStack() as stack:
            try:
                leaf = self._open(stack, (LAYOUT_VERSION, kind, key[:2]), create=False)
            except FileNotFoundError:
                stats.bump("disk_misses")
                return None
            except (UnsafeDirectory, OSError) as exc:
                self._unusable(exc, f"cannot open {self._path(kind, key).parent}")
                stats.bump("disk_misses")
                return None
            ident = None
            try:
                raw, ident = read_regular_file(leaf, key, MAX_ENTRY_BYTES)
                meta, blobs = decode_entry(raw, kind=kind, key=key)
                value = (meta, blobs) if validate is None else validate(meta, blobs)
            except FileNotFoundError:
                stats.bump("disk_misses")
                return None
            except RejectedFile as exc:
                self._reject(leaf, kind, key, exc.ident, str(exc))
                return None
            except OSError:
                stats.bump("disk_misses")
                return None
            except Exception as exc:  # noqa: BLE001 - whatever the entry holds, it is a miss
                self._reject(leaf, kind, key, ident, f"{type(exc).__name__}: {exc}")
                return None
        stats.bump("disk_hits")
        return value

    def _reject(self, dir_fd: int, kind: str, key: str, ident: tuple[int, int] | None, reason: str) -> None:
        logger.debug("cuprims: discarding disk cache entry %s/%s: %s", kind, key, reason)
        stats.bump("disk_corrupt_discarded")
        stats.bump("disk_misses")
        remove_if_same(dir_fd, key, ident)

    def put(self, kind: str, key: str, meta: dict[str, Any], blobs: dict[str, bytes]) -> None:
        self._check_names(kind, key)
        data = encode_entry(meta, blobs, kind=kind, key=key)
        if len(data) > MAX_ENTRY_BYTES:
            logger.debug("cuprims: not caching %s/%s: %d bytes", kind, key, len(data))
            return
        with contextlib.ExitStack() as stack:
            try:
                leaf = self._open(stack, (LAYOUT_VERSION, kind, key[:2]), create=True)
                write_file_atomic(leaf, key, data)
            except (UnsafeDirectory, OSError) as exc:
                # A read-only, full or foreign cache must not break the user's program: the
                # build result is still returned, just not kept.
                self._unusable(exc, f"cannot write in {self._path(kind, key).parent}")
                return
        stats.bump("disk_writes")
        mark_usable("disk cache", self.root)

    def get_or_build(self, kind: str, key: str, read: Callable[[dict[str, Any], dict[str, bytes]], Any],
                     build: Callable[[], Any]) -> Any:
        """The entry (as ``read`` makes it), or ``build()`` under the key's inter-process
        lock, looking again once the lock is held (another process may have built it
        meanwhile). ``build`` writes the entry itself."""
        with stats.stage("disk lookup", kind):
            hit = self.get(kind, key, read)
        if hit is not None:
            return hit
        with self.lock(kind, key):
            hit = self.get(kind, key, read)
            if hit is not None:
                return hit
            return build()

    @contextlib.contextmanager
    def lock(self, kind: str, key: str) -> Iterator[None]:
        """An inter-process lock for one kind and key (advisory; a no-op where unsupported).

        Locks nest in one order only: a ``cubin`` lock may be held while a ``kernel`` lock
        is taken, never the other way round."""
        self._check_names(kind, key)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        with contextlib.ExitStack() as stack:
            fd = None
            try:
                locks = self._open(stack, (LAYOUT_VERSION, "locks"), create=True)
                fd = _open_lock_file(locks, f"{kind}-{key}.lock")
                stack.callback(os.close, fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except (UnsafeDirectory, OSError) as exc:
                self._unusable(exc, f"cannot lock {self.root / LAYOUT_VERSION / 'locks' / f'{kind}-{key}.lock'}")
                fd = None
            if fd is None:
                yield  # build unlocked: at worst two processes compile the same thing
                return
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def clear(self) -> None:
        """Delete every entry and lock (this layout and the older ones) under the root."""
        import shutil

        try:
            root_fd = open_private_dir(self.root, create=False)
        except FileNotFoundError:
            return
        except (UnsafeDirectory, OSError) as exc:
            self._unusable(exc, f"cannot open {self.root}")
            return
        try:
            for name in (LAYOUT_VERSION, *OLD_LAYOUTS):
                if shutil.rmtree.avoids_symlink_attacks and _rmtree_takes_dir_fd():
                    shutil.rmtree(name, ignore_errors=True, dir_fd=root_fd)
                else:  # Python 3.10
                    shutil.rmtree(self.root / name, ignore_errors=True)
        finally:
            os.close(root_fd)

    def status(self) -> str:
        """``"ok"`` or why this cache cannot be used (a problem met earlier, else a probe
        that creates nothing)."""
        problem = recorded_problem("disk cache", self.root)
        if problem is not None:
            return problem
        try:
            fd = open_private_dir(self.root, create=False)
        except FileNotFoundError:
            parent = self.root.parent
            while not os.path.lexists(parent) and parent != parent.parent:
                parent = parent.parent
            if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK, effective_ids=_EFF):
                problem = f"cannot create {self.root}: {parent} is not a writable directory"
        except (UnsafeDirectory, OSError) as exc:
            problem = (str(exc) if isinstance(exc, UnsafeDirectory)
                       else f"cannot open {self.root}: {exc.strerror or exc}")
        else:
            os.close(fd)
            if not os.access(self.root, os.W_OK | os.X_OK, effective_ids=_EFF):
                problem = f"{self.root} is not writable"
        if problem is None:
            return "ok"
        report_unusable("disk cache", self.root, problem)
        return problem


_EFF = os.access in getattr(os, "supports_effective_ids", set())


def _rmtree_takes_dir_fd() -> bool:
    import inspect
    import shutil

    return "dir_fd" in inspect.signature(shutil.rmtree).parameters


def _open_lock_file(dir_fd: int, name: str) -> int:
    flags = os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
    for attempt in range(2):
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno != errno.ELOOP or attempt:
                raise
            os.unlink(name, dir_fd=dir_fd)   # a symlink in our own directory: drop it, not follow it
            continue
        st = os.fstat(fd)
        euid = _euid()
        if stat.S_ISREG(st.st_mode) and (euid < 0 or st.st_uid == euid):
            if stat.S_IMODE(st.st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            return fd
        os.close(fd)
        if attempt:
            break
        remove_if_same(dir_fd, name, _ident(st))
    raise OSError(errno.EINVAL, "lock path is not a regular file of ours", name)
