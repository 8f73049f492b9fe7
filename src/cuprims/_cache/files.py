"""Private files on POSIX: directories of ours only (0700, not a symlink, owned by us, not
writable by others), files written atomically 0600 without following a symlink, files
read only when they are regular files of ours within a size bound, and the one-warning
report of a directory that cannot be used. The disk cache and the generated-source dumps
(:mod:`cuprims._compile.nvrtc`) write through these helpers only."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path

from cuprims._base.log import logger

#: The name a writer gives its temporary file before renaming it over ``name``: what a
#: crashed writer leaves behind (see :func:`is_temp_name`).
TEMP_SUFFIX = ".tmp"


# ----------------------------------------------------------------------------- reporting

_report_lock = threading.Lock()
_status: dict[tuple[str, str], str] = {}
_warned: set[tuple[str, str]] = set()


def first_time(what: str, path: Path | str) -> bool:
    """Whether this is the first report of ``what`` about ``path`` in this process (each
    problem is logged once, however many builds meet it)."""
    ident = (what, str(path))
    with _report_lock:
        first = ident not in _warned
        _warned.add(ident)
    return first


def report_unusable(what: str, path: Path | str, reason: str) -> None:
    """Record that ``path`` (a ``what``) cannot be used; warn the first time per process."""
    with _report_lock:
        _status[(what, str(path))] = reason
    if first_time(what, path):
        if what == "disk cache":
            consequence = ("compiled code is not being cached on disk. Point CUPRIMS_CACHE_DIR at a "
                           "private writable directory, or set CUPRIMS_DISK_CACHE=0")
        else:
            consequence = "generated sources are not being written there"
        logger.warning("cuprims: the %s at %s cannot be used (%s); %s.", what, path, reason, consequence)


def report_skipped(path: Path | str, reason: str) -> None:
    """Warn (once per process and path) that ``path`` inside the disk cache is left alone:
    a pass over the cache may not touch it (``reason`` says why, naming the path); the rest
    of the cache stays in use."""
    if first_time("skipped", path):
        logger.warning("cuprims: skipping part of the disk cache: %s; what is under it is not counted, evicted "
                       "or cleared.", reason)


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
                                                            os.chmod, os.rmdir, os.link)))


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


def open_dir(name: str, shown: str, *, dir_fd: int | None = None, create: bool = False) -> int:
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
    return open_dir(str(path), str(path), create=create)


def write_file_atomic(dir_fd: int, name: str, data: bytes, *, replace: bool = True) -> bool:
    """Write ``data`` to ``name`` in the directory ``dir_fd``: a fresh 0600 temp file with an
    unpredictable name (``O_EXCL | O_NOFOLLOW``), then renamed over ``name`` (a rename
    replaces a symlink there instead of following it). With ``replace=False`` the temp file
    is hard-linked to ``name`` instead, which fails if anything is there already: then
    nothing is written. Returns whether ``name`` is now ``data``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    for _ in range(8):
        # os.urandom, not the secrets module: importing secrets (base64, hmac) cost a warm
        # process ~1.5 ms, and a random name needs nothing it adds
        tmp = f".{name}.{os.urandom(8).hex()}{TEMP_SUFFIX}"
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
        if replace:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return True
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            os.unlink(tmp, dir_fd=dir_fd)
            return False
        except OSError:
            # a file system without hard links: look, then rename (a writer that lands in
            # between is replaced by an equal entry, as with replace=True)
            if _exists(dir_fd, name):
                os.unlink(tmp, dir_fd=dir_fd)
                return False
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return True
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)   # ``name`` holds the data now; the temp name is just a second link
        return True
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def ident_of(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def open_regular_file(dir_fd: int, name: str, limit: int) -> tuple[int, os.stat_result]:
    """An fd (read-only, close-on-exec) for ``name`` in ``dir_fd`` and its stat, opened only
    if it is a regular file of ours no larger than ``limit``; never follows a symlink nor
    blocks. The caller closes the fd.

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
            ident = ident_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except OSError:
            ident = None
        reason = "entry is a symbolic link" if exc.errno == errno.ELOOP else describe_error(exc)
        raise RejectedFile(reason, ident) from None
    try:
        st = os.fstat(fd)
        ident = ident_of(st)
        if not stat.S_ISREG(st.st_mode):
            raise RejectedFile("entry is not a regular file", ident)
        euid = _euid()
        if euid >= 0 and st.st_uid != euid:
            raise RejectedFile(f"entry is owned by uid {st.st_uid}", ident)
        if st.st_size > limit:
            raise RejectedFile(f"entry is {st.st_size} bytes, over the {limit} byte bound", ident)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular_file(dir_fd: int, name: str, limit: int) -> tuple[bytes, tuple[int, int]]:
    """The bytes of ``name`` in ``dir_fd`` and its (dev, inode), read only if it is a regular
    file of ours no larger than ``limit``; never follows a symlink nor blocks.

    Raises FileNotFoundError when nothing is there, :class:`RejectedFile` when something
    that must not be read is, other OSErrors as they come."""
    fd, st = open_regular_file(dir_fd, name, limit)
    ident = ident_of(st)
    try:
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
        if ident_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) == ident:
            os.unlink(name, dir_fd=dir_fd)


def open_lock_file(dir_fd: int, name: str) -> int:
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
        remove_if_same(dir_fd, name, ident_of(st))
    raise OSError(errno.EINVAL, "lock path is not a regular file of ours", name)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a writer's temporary file (``.<name>.<16 hex>.tmp``)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX) and len(name) > 22
