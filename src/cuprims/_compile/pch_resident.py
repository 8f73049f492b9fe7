"""Which precompiled header each header prefix has in this process, and the unpacked PCHs
the process keeps open for its later compiles.

Per prefix key the table holds :data:`SEEN` (compiled once, no PCH yet), :data:`FAILED`
(compile without a PCH for the rest of the process) or the path NVRTC reads the PCH
from. A PCH loaded from (or written to) the disk cache is a memory file kept open as
``/proc/self/fd/N``; those are *resident*, least recently used first, and past
:data:`RESIDENT_BYTES` the least recently used are closed (loaded again from the disk
cache when a compile needs them, ~0.1-0.15 s for 150 MB on the 2-core machine). PCHs made
within the process only live in :func:`temp_dir`, removed at exit.

A process that is killed leaves its directory behind (hundreds of MB per PCH, GBs for a
process that made many): each directory holds a file the process keeps locked while it
lives (``flock``, which the kernel releases when the process ends, whatever its PID
namespace), and a process making its own directory first removes every directory of the
same user whose lock it can take.

When to make or use a PCH is :mod:`.pch`'s; this module only keeps the answers, under
its own lock (taken inside :mod:`.pch`'s compile lock where both are held).
"""

from __future__ import annotations

import atexit
import collections
import fcntl
import os
import shutil
import tempfile
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuprims._compile.pch_store import PchStore

NEW, SEEN, FAILED = "new", "seen", "failed"
#: The bytes of resident PCHs a process keeps open (three or four PCHs).
RESIDENT_BYTES = 512 << 20

_state_lock = threading.Lock()
_state: dict[str, str] = {}              # key -> PCH path, SEEN (compiled once) or FAILED
_on_disk: dict[str, tuple[PchStore, str, tuple[int, int]]] = {}   # path -> its entry (store, disk key, ident)
_kept_fds: list[int] = []                # PCHs handed to NVRTC as /proc/self/fd/N that have no disk entry
# key -> (fd, bytes) of the resident PCHs, least recently used first: memory files (memory,
# not page cache), so their total is held to RESIDENT_BYTES
_resident: collections.OrderedDict[str, tuple[int, int]] = collections.OrderedDict()
_directory: str | None = None


_TEMP_PREFIX = "cuprims-pch-"
_ALIVE = "alive.lock"                    # locked by the directory's process while it lives
_UNLOCKED_AGE = 3600                     # a directory with no lock file: removed once this old (s)
_alive_fd: int | None = None
_dir_lock = threading.Lock()


def temp_dir() -> str:
    """This process's private directory for PCHs without a disk entry (0700, removed at exit;
    see the module for what a killed process leaves)."""
    global _directory
    with _dir_lock:
        if _directory is None:
            _directory = _make_temp_dir()
    return _directory


def _make_temp_dir() -> str:
    global _alive_fd
    root = tempfile.gettempdir()
    remove_abandoned(root)
    path = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=root)   # 0700, ours
    fd = os.open(os.path.join(path, _ALIVE), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)             # a new file: nobody else holds it
    _alive_fd = fd                                             # held open until the process ends
    atexit.register(shutil.rmtree, path, True)
    return path


def remove_abandoned(root: str) -> list[str]:
    """Remove the PCH directories under ``root`` of this user's processes that ended without
    removing them (their lock is free; one with no lock file once an hour old). Returns
    the paths removed."""
    removed = []
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(_TEMP_PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, _ALIVE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            # no lock file: one being made this instant, or a directory older than the lock
            if time.time() - st.st_mtime > _UNLOCKED_AGE:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)        # its process lives
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


def claim(key: str) -> str:
    """The prefix's state before this compile (:data:`NEW` the first time, which marks it
    :data:`SEEN`)."""
    with _state_lock:
        state = _state.get(key, NEW)
        if state == NEW:
            _state[key] = SEEN
        return state


def state_of(key: str) -> str:
    """The prefix's state: :data:`SEEN`, :data:`FAILED` or its PCH's path."""
    with _state_lock:
        return _state[key]


def mark(key: str, state: str) -> None:
    """Set the prefix's state (:data:`SEEN`, :data:`FAILED` or a PCH's path)."""
    with _state_lock:
        _state[key] = state


def keep(key: str, fd: int, origin: tuple[PchStore, str, tuple[int, int]] | None) -> str:
    """Make the PCH open as ``fd`` the prefix's for this process's compiles; one with a disk
    entry (``origin``: its store, disk key and ident) is resident (see
    :data:`RESIDENT_BYTES`). Returns NVRTC's path of it."""
    path = fd_path(fd)
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


def fd_path(fd: int) -> str:
    """The path NVRTC opens the PCH kept as ``fd`` by."""
    return f"/proc/self/fd/{fd}"


def touch(key: str) -> None:
    """The prefix's resident PCH was just used: the last to be closed."""
    with _state_lock:
        if key in _resident:
            _resident.move_to_end(key)


def refuse(key: str, path: str) -> tuple[PchStore, str, tuple[int, int]] | None:
    """The PCH at ``path`` is not to be used again in this process: the prefix is
    :data:`FAILED` and a resident copy closed. Returns its disk entry (store, disk key,
    ident), if it has one."""
    with _state_lock:
        origin = _on_disk.get(path)
        if key in _resident and fd_path(_resident[key][0]) == path:
            _release(key)   # its memory goes too
        _state[key] = FAILED
        _on_disk.pop(path, None)
    return origin


def _release(key: str) -> None:
    """Close the resident PCH of ``key`` (the caller holds :mod:`.pch`'s compile lock, so no
    compile is reading it, and ``_state_lock``); a later compile of the prefix loads it again."""
    fd, _ = _resident.pop(key)
    path = fd_path(fd)
    _on_disk.pop(path, None)
    if _state.get(key) == path:
        _state[key] = SEEN
    os.close(fd)
