"""The on-disk artifact store.

Each entry is one file written atomically (a temp file with an unpredictable
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
  again once they hold it, so two processes never compile the same key twice -- unless the
  holder keeps the lock past the wait bound (``settings.cache_lock_timeout``,
  ``CUPRIMS_CACHE_LOCK_TIMEOUT``, 60 s by default: a stopped or hung process). Then the
  waiter logs it (once per process and lock) as a warning on the ``cuprims`` logger and
  builds without the lock, writing its entry only if the key's entry is still absent.
* A cache directory that cannot be used (not writable, not a directory, not ours) never
  fails a build: the result is just not kept. The problem is logged once per process and
  directory as a warning on the ``cuprims`` logger and shown by ``cache_info()``'s
  ``disk_status``. A damaged directory elsewhere in the cache (another key's, ``uses``,
  ``locks``) is skipped by the passes over the whole cache -- eviction, use records,
  ``clear`` -- and logged once (:mod:`cuprims._cache.walk`).

Entries of kind ``pch`` (NVRTC precompiled headers) are the exception to the framing:
each is the PCH packed as zstd frames plus a framed sidecar with its sizes and checksum
(:mod:`cuprims._compile.pch_store`), unpacked into a memory file for NVRTC, which reads it by
path; they share the directories, locks, use records, size cap and eviction of the others.

The same private-directory and no-follow helpers write generated sources
(:mod:`cuprims._compile.nvrtc`).

cuda.core.utils has program caches, but they store raw bytes only and refuse
``include_path``/name expressions without a digest we would compute anyway; we need
several artifacts plus metadata per entry and a lock per key, so this module is ours.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from cuprims._base import stats
from cuprims._cache.entries import MAX_ENTRY_BYTES, decode_entry, encode_entry
from cuprims._cache.files import (RejectedFile, UnsafeDirectory, first_time, logger, mark_usable, open_dir,
                                  open_lock_file, open_private_dir, read_regular_file, recorded_problem, remove_if_same,
                                  report_unusable, write_file_atomic)
from cuprims._cache.lifecycle import KEY, KIND, LOCKS, USES, Lifecycle
from cuprims._cache.walk import Walk
from cuprims import config
from cuprims.config import DEFAULT_LOCK_TIMEOUT

LAYOUT_VERSION = "v2"
OLD_LAYOUTS = ("v1",)   # removed too by DiskCache.clear()

# The keys this thread is building without their lock (root, kind, key): their entries
# are written only if still absent, so an unlocked build never replaces one that another
# process (the lock's holder, say) wrote meanwhile.
_unlocked = threading.local()


class DiskCache(Lifecycle):
    """Artifacts on disk under ``root/v2/<kind>/<key[:2]>/<key>``, locks under ``root/v2/locks``,
    use records under ``root/v2/uses`` (:mod:`cuprims._cache.lifecycle`); with
    ``max_bytes``, each write evicts the least recently used entries past that size;
    :meth:`lock` waits at most ``lock_timeout`` seconds for another process's lock."""

    layout = LAYOUT_VERSION

    def __init__(self, root: Path, max_bytes: int | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.lock_timeout = lock_timeout

    def _path(self, kind: str, key: str) -> Path:
        return self.root / LAYOUT_VERSION / kind / key[:2] / key

    @staticmethod
    def _check_names(kind: str, key: str) -> None:
        if not KIND.fullmatch(kind) or kind in (LOCKS, USES) or not KEY.fullmatch(key):
            raise ValueError(f"bad cache kind/key: {kind!r}/{key!r}")

    def _open(self, stack: contextlib.ExitStack, parts: tuple[str, ...], *, create: bool) -> int:
        fd = open_private_dir(self.root, create=create)
        stack.callback(os.close, fd)
        shown = self.root
        for part in parts:
            shown = shown / part
            fd = open_dir(part, str(shown), dir_fd=fd, create=create)
            stack.callback(os.close, fd)
        return fd

    def open_leaf(self, stack: contextlib.ExitStack, kind: str, key: str, *, create: bool) -> int:
        """The checked directory that holds ``kind``/``key`` (closed by ``stack``), for entries
        that are not read whole (:mod:`cuprims._compile.pch_store`)."""
        self._check_names(kind, key)
        return self._open(stack, (LAYOUT_VERSION, kind, key[:2]), create=create)

    def note_unusable(self, exc: BaseException, doing: str) -> None:
        """Report that the cache cannot be used (once per process and directory)."""
        self._unusable(exc, doing)

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
        self.record_use(kind, key)
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
        replace = (str(self.root), kind, key) not in _unlocked_keys()
        with contextlib.ExitStack() as stack:
            try:
                leaf = self._open(stack, (LAYOUT_VERSION, kind, key[:2]), create=True)
                written = write_file_atomic(leaf, key, data, replace=replace)
            except (UnsafeDirectory, OSError) as exc:
                # A read-only, full or foreign cache must not break the user's program: the
                # build result is still returned, just not kept.
                self._unusable(exc, f"cannot write in {self._path(kind, key).parent}")
                return
        if not written:
            logger.debug("cuprims: %s/%s was written by another process meanwhile: kept", kind, key)
            return
        stats.bump("disk_writes")
        mark_usable("disk cache", self.root)
        if self.max_bytes is not None:
            self.enforce_cap(self.max_bytes)

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
        """An inter-process lock for one kind and key (advisory; a no-op where unsupported),
        waited for at most :attr:`lock_timeout` seconds.

        Without it (the wait ran out, or the lock file cannot be used) the block runs
        unlocked -- at worst two processes compile the same thing -- and :meth:`put` writes
        the key's entry only if it is still absent. Locks nest in one order only: a
        ``cubin`` lock may be held while a ``kernel`` lock is taken, never the other way round."""
        self._check_names(kind, key)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        path = self.root / LAYOUT_VERSION / LOCKS / f"{kind}-{key}.lock"
        with contextlib.ExitStack() as stack:
            fd = None
            try:
                locks = self._open(stack, (LAYOUT_VERSION, LOCKS), create=True)
                fd = open_lock_file(locks, path.name)
                stack.callback(os.close, fd)
                if not _acquire(fd, self.lock_timeout):
                    if first_time("lock wait", path):
                        logger.warning("cuprims: waited %g s for the disk cache lock %s, held by another process "
                                       "(stopped or hung?); building without it (settings.cache_lock_timeout, "
                                       "CUPRIMS_CACHE_LOCK_TIMEOUT)", self.lock_timeout, path)
                    fd = None
            except (UnsafeDirectory, OSError) as exc:
                self._unusable(exc, f"cannot lock {path}")
                fd = None
            if fd is None:
                ident = (str(self.root), kind, key)
                building = _unlocked_keys()
                building.add(ident)
                try:
                    yield
                finally:
                    building.discard(ident)
                return
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def try_lock(self, kind: str, key: str) -> Iterator[bool]:
        """The lock of :meth:`lock` without waiting: yields whether it is held (False while
        another process holds it; True, unlocked, where locking is unsupported or fails,
        like :meth:`lock`). For work that is better skipped than waited for."""
        self._check_names(kind, key)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield True
            return
        with contextlib.ExitStack() as stack:
            try:
                locks = self._open(stack, (LAYOUT_VERSION, LOCKS), create=True)
                fd = open_lock_file(locks, f"{kind}-{key}.lock")
                stack.callback(os.close, fd)
            except (UnsafeDirectory, OSError) as exc:
                self._unusable(exc, f"cannot lock {self.root / LAYOUT_VERSION / 'locks' / f'{kind}-{key}.lock'}")
                yield True
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def clear(self) -> list[str]:
        """Delete every entry, use record and lock (this layout and the older ones) under the
        root; returns why each path that had to be left was left (empty: all gone).

        Everything in the cache's own directories is removed; a directory that is not a
        private one of ours (another user's, writable by others, a symlink, unreadable) is
        removed only if empty, else left and reported (:meth:`cache_walk.Walk.remove`)."""
        walk = Walk()
        with contextlib.ExitStack() as stack:
            root_fd = walk.open_root(stack, self.root)
            if root_fd is not None:
                for name in (LAYOUT_VERSION, *OLD_LAYOUTS):
                    walk.remove(root_fd, name, self.root / name)
        return walk.skipped

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


def configured_cache() -> DiskCache | None:
    """The disk cache the settings name (``CUPRIMS_CACHE_DIR``, its size cap and lock
    wait, read now), or None while it is off (``CUPRIMS_DISK_CACHE=0``)."""
    if not config.disk_cache_enabled():
        return None
    return DiskCache(config.cache_dir(), config.cache_max_bytes(), config.cache_lock_timeout())


def _unlocked_keys() -> set[tuple[str, str, str]]:
    keys = getattr(_unlocked, "keys", None)
    if keys is None:
        keys = _unlocked.keys = set()
    return keys


def _acquire(fd: int, timeout: float) -> bool:
    """Take the exclusive lock of ``fd``, waiting at most ``timeout`` seconds; whether it is held.

    Polled (1 ms doubling to 50 ms between tries): a blocking flock cannot be given up
    from the thread that waits in it."""
    import fcntl

    deadline, pause = time.monotonic() + timeout, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
