"""The disk cache's lifecycle: what it holds, how often and how lately each entry was used,
eviction of the least recently used entries past a size cap, and removal of what crashed
writers and finished builds leave behind.

* Use records: ``<root>/v2/uses/<kind>-<key>`` holds an entry's disk-hit count as ASCII
  and its mtime is the entry's last use (the entry's own mtime until its first hit).
  They live apart from the entries, so the entry tree holds entries only. Two processes
  hitting one entry at once may lose one count: the counts are for people, the order for
  eviction.
* Eviction: after each write, if the entries add up to more than the cap, the least
  recently used are unlinked until they hold at most 90% of it (the margin keeps one
  write from evicting at every put). An entry is unlinked only if it is still the file
  that was measured (a fresh rewrite is left alone). A reader that has the file open
  still reads all of it; one that comes after finds nothing and rebuilds: no reader ever
  sees a torn or half-evicted entry, because entries are never written in place.
* Debris: a writer's temporary file (``.<key>.<16 hex>.tmp``) or a lock file nobody holds,
  older than :data:`STALE_SECONDS`, is removed by the same pass and by ``prune``; so is a
  sidecar whose entry is gone.
* Sidecars: an entry whose file holds nothing but its artifact (a ``pch`` entry is the
  packed PCH, :mod:`cuprims._compile.pch_store`) keeps its checked metadata in
  ``<key>.meta`` beside it. A sidecar is not an entry (it is not counted nor listed); it is
  removed with its entry.
* Shares: a kind may be given a share of the cap (:meth:`Lifecycle.enforce_kind_cap`), so
  that a few large entries of it (precompiled headers, 7-16 MB each packed) cannot push out the
  many small ones of the others.
* Damage: every pass here goes through one guarded walk (:mod:`cuprims._cache.walk`):
  a directory it may not touch (not ours, writable by others, a symlink, not a directory,
  unreadable) is skipped and reported once, and the pass goes on with the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

from cuprims._cache.files import (RejectedFile, ident_of, is_temp_name, logger, open_lock_file, read_regular_file,
                                  remove_if_same, write_file_atomic)
from cuprims._cache.walk import Walk

USES = "uses"
LOCKS = "locks"
STALE_SECONDS = 600.0      # older debris than this belongs to no live writer
EVICT_TO = 0.9             # eviction stops at this fraction of the cap
SIDECAR = ".meta"         # suffix of an entry's sidecar (its key + this)
KIND = re.compile(r"[a-z]+")           # an entry kind's directory name (the disk cache checks names by these)
KEY = re.compile(r"[0-9a-f]{2,128}")   # an entry's file name
_USE = re.compile(rf"{KIND.pattern}-{KEY.pattern}")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One cached artifact as the lifecycle sees it."""

    kind: str
    key: str
    size: int
    last_used: float   # seconds since the epoch
    hits: int
    ident: tuple[int, int]


class Scan(NamedTuple):
    """What :meth:`Lifecycle.scan` found."""

    entries: list[Entry]
    removed: int                 # debris files removed
    skipped: tuple[str, ...]     # why each path it had to leave alone was left (see cache_walk)


def _stale(entry: os.DirEntry, now: float) -> bool:
    with contextlib.suppress(OSError):
        return now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
    return False


class Lifecycle:
    """The lifecycle half of :class:`cuprims._cache.disk.DiskCache` (which provides
    ``root`` and ``layout``)."""

    root: Path
    layout: str

    # ---------------------------------------------------------------- use records
    def record_use(self, kind: str, key: str) -> None:
        """Count one disk hit of ``kind``/``key`` and make it the entry's last use (an
        unusable ``uses`` directory costs the count, never the hit)."""
        name = f"{kind}-{key}"
        walk = Walk()
        with contextlib.ExitStack() as stack:
            top = walk.open_path(stack, self.root, (self.layout,))
            shown = self.root / self.layout / USES
            uses = None if top is None else walk.open(stack, top, USES, shown, create=True)
            if uses is None:
                return
            try:
                write_file_atomic(uses, name, str(self._hits(uses, name) + 1).encode())
            except OSError as exc:
                walk.skip(shown, exc, "cannot write a use record in")

    def prune(self, max_bytes: int) -> tuple[int, int]:
        """Evict down to ``max_bytes`` and remove debris: (entries evicted, debris removed)."""
        entries, removed, _ = self.scan()
        return self._evict_past(entries, max_bytes), removed

    @staticmethod
    def _hits(uses: int, name: str) -> int:
        try:
            text, _ = read_regular_file(uses, name, 32)
        except (OSError, RejectedFile):   # none yet, or not a use record of ours: counted from zero
            return 0
        return int(text) if text.isdigit() else 0

    # ---------------------------------------------------------------- scanning
    def scan(self, *, remove_debris: bool = True) -> Scan:
        """Every entry (kind, key, bytes, last use, hits), how many debris files were removed,
        and what had to be left alone."""
        now, entries, removed, walk = time.time(), [], 0, Walk()
        top_path = self.root / self.layout
        with contextlib.ExitStack() as stack:
            top = walk.open_path(stack, self.root, (self.layout,))
            if top is None:
                return Scan([], 0, tuple(walk.skipped))
            uses: dict[str, tuple[int, float]] = {}
            with walk.dir(top, USES, top_path / USES) as ufd:
                for item in [] if ufd is None else walk.list(ufd, top_path / USES):
                    if _USE.fullmatch(item.name):
                        with contextlib.suppress(OSError):
                            uses[item.name] = (self._hits(ufd, item.name), item.stat(follow_symlinks=False).st_mtime)
                    elif remove_debris and is_temp_name(item.name) and _stale(item, now):
                        removed += _unlink(ufd, item)
            for kind_dir in walk.list(top, top_path):
                kind = kind_dir.name
                if not KIND.fullmatch(kind) or kind in (USES, LOCKS):
                    continue
                with walk.dir(top, kind, top_path / kind) as kfd:
                    for sub in [] if kfd is None else walk.list(kfd, top_path / kind):
                        if not (sub.is_dir(follow_symlinks=False) or sub.is_symlink()):
                            continue
                        shown = top_path / kind / sub.name
                        with walk.dir(kfd, sub.name, shown) as sfd:
                            for item in [] if sfd is None else walk.list(sfd, shown):
                                try:
                                    st = item.stat(follow_symlinks=False)
                                except OSError:
                                    continue
                                if KEY.fullmatch(item.name) and stat.S_ISREG(st.st_mode):
                                    hits, used = uses.get(f"{kind}-{item.name}", (0, st.st_mtime))
                                    entries.append(Entry(kind, item.name, st.st_size, max(used, st.st_mtime), hits,
                                                         ident_of(st)))
                                elif remove_debris and is_temp_name(item.name) and _stale(item, now):
                                    removed += _unlink(sfd, item)
                                elif remove_debris and _orphan_sidecar(sfd, item.name) and _stale(item, now):
                                    removed += _unlink(sfd, item)
            # the locks directory is checked by every scan (a damaged one is reported), swept by some
            with walk.dir(top, LOCKS, top_path / LOCKS) as lfd:
                if lfd is not None and remove_debris:
                    removed += self._remove_idle_locks(walk, lfd, top_path / LOCKS, now)
        return Scan(entries, removed, tuple(walk.skipped))

    @staticmethod
    def _remove_idle_locks(walk: Walk, lfd: int, shown: Path, now: float) -> int:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            return 0
        removed = 0
        for item in walk.list(lfd, shown):
            if not _stale(item, now):
                continue
            try:
                fd = open_lock_file(lfd, item.name)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue   # held: a build is under way
            try:
                # still the file we hold? then nobody waits on it: a waiter would hold it open
                # and be handed the lock on this inode, while a newcomer creates a fresh one,
                # so at worst two processes compile the same key once
                remove_if_same(lfd, item.name, ident_of(os.fstat(fd)))
                removed += 1
            finally:
                os.close(fd)
        return removed

    # ---------------------------------------------------------------- eviction
    def enforce_cap(self, max_bytes: int) -> int:
        """Evict least recently used entries while the entries hold more than ``max_bytes``;
        returns how many were evicted."""
        return self._evict_past(self.scan().entries, max_bytes)

    def enforce_kind_cap(self, kind: str, max_bytes: int) -> int:
        """Evict the least recently used entries of ``kind`` while that kind's entries hold
        more than ``max_bytes`` (its share of the cap); returns how many were evicted."""
        return self._evict_past([e for e in self.scan(remove_debris=False).entries if e.kind == kind], max_bytes)

    def _evict_past(self, entries: list[Entry], max_bytes: int) -> int:
        total = sum(e.size for e in entries)
        if total <= max_bytes:
            return 0
        target, evicted = int(max_bytes * EVICT_TO), 0
        for entry in sorted(entries, key=lambda e: e.last_used):
            if total <= target:
                break
            if self._evict(entry):
                total -= entry.size
                evicted += 1
        logger.debug("cuprims: disk cache over %d bytes: evicted %d entries", max_bytes, evicted)
        return evicted

    def _evict(self, entry: Entry) -> bool:
        walk, top_path = Walk(), self.root / self.layout
        with contextlib.ExitStack() as stack:
            top = walk.open_path(stack, self.root, (self.layout,))
            kfd = None if top is None else walk.open(stack, top, entry.kind, top_path / entry.kind)
            shard = entry.key[:2]
            leaf = None if kfd is None else walk.open(stack, kfd, shard, top_path / entry.kind / shard)
            if leaf is None:
                return False
            remove_if_same(leaf, entry.key, entry.ident)
            with contextlib.suppress(OSError):
                os.unlink(entry.key + SIDECAR, dir_fd=leaf)
            with walk.dir(top, USES, top_path / USES) as ufd:
                if ufd is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(f"{entry.kind}-{entry.key}", dir_fd=ufd)
        return True

    def summary(self) -> dict[str, Any]:
        """What ``python -m cuprims cache info`` shows: totals per kind, every entry, and the
        paths the scan had to leave alone (``skipped``)."""
        entries, _, skipped = self.scan(remove_debris=False)
        kinds: dict[str, dict[str, int]] = {}
        for e in entries:
            k = kinds.setdefault(e.kind, {"entries": 0, "bytes": 0, "hits": 0})
            k["entries"] += 1
            k["bytes"] += e.size
            k["hits"] += e.hits
        return {"entries": len(entries), "bytes": sum(e.size for e in entries),
                "hits": sum(e.hits for e in entries), "kinds": kinds, "skipped": list(skipped),
                "items": [{"kind": e.kind, "key": e.key, "bytes": e.size, "hits": e.hits,
                           "last_used": e.last_used} for e in sorted(entries, key=lambda e: -e.last_used)]}


def _orphan_sidecar(dir_fd: int, name: str) -> bool:
    """Whether ``name`` is a sidecar whose entry is not there (left by a crashed writer)."""
    if not name.endswith(SIDECAR) or not KEY.fullmatch(name[:-len(SIDECAR)]):
        return False
    try:
        os.stat(name[:-len(SIDECAR)], dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _unlink(dir_fd: int, item: os.DirEntry) -> int:
    try:
        os.unlink(item.name, dir_fd=dir_fd)
        return 1
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            logger.debug("cuprims: cannot remove %s: %s", item.name, exc)
        return 0
