"""The one guarded walk over the disk cache's directories, shared by every pass that visits
more than the directory of the entry it is after: the scan (what the cache holds), eviction,
debris and idle-lock removal, use records, and ``clear``.

Each directory is opened under the private-file rules (:func:`open_dir`: a real directory,
not a symlink, ours, not writable by group or others). One that fails them, or cannot be
opened or listed at all (mode 000 for an unprivileged user), is *skipped*: the pass goes
on with the rest, the problem is kept in :attr:`Walk.skipped` (the command line reports
it) and logged once per process and path as a warning on the ``cuprims`` logger. So a
damaged or foreign directory anywhere in the cache costs what lies under it, never a
build, a count or a ``clear`` of the rest.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator

from cuprims._cache.files import UnsafeDirectory, open_dir, open_private_dir, report_skipped


def problem(path: Path, exc: BaseException, doing: str = "cannot open") -> str:
    """One sentence naming ``path`` and why it cannot be used (``doing`` it failed)."""
    if isinstance(exc, UnsafeDirectory):
        return str(exc)   # its message names the path already
    if isinstance(exc, OSError) and exc.strerror:
        return f"{doing} {path}: {exc.strerror}"
    return f"{doing} {path}: {exc or type(exc).__name__}"


class Walk:
    """One pass over a cache's directories; :attr:`skipped` says what it had to leave alone."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def skip(self, path: Path, exc: BaseException, doing: str = "cannot open") -> None:
        """Leave ``path`` alone: keep the reason and warn (once per process and path)."""
        reason = problem(path, exc, doing)
        self.skipped.append(reason)
        report_skipped(path, reason)

    # ---------------------------------------------------------------- opening
    def open_root(self, stack: contextlib.ExitStack, root: Path) -> int | None:
        """The cache's root directory (closed by ``stack``), or None when it is absent or skipped."""
        try:
            fd = open_private_dir(root, create=False)
        except FileNotFoundError:
            return None
        except (UnsafeDirectory, OSError) as exc:
            self.skip(root, exc)
            return None
        stack.callback(os.close, fd)
        return fd

    def open(self, stack: contextlib.ExitStack, parent: int, name: str, shown: Path, *,
             create: bool = False) -> int | None:
        """Directory ``name`` in ``parent`` (``shown`` is its path, for messages; closed by
        ``stack``), or None when it is absent or skipped."""
        try:
            fd = open_dir(name, str(shown), dir_fd=parent, create=create)
        except FileNotFoundError:
            return None
        except (UnsafeDirectory, OSError) as exc:
            self.skip(shown, exc)
            return None
        stack.callback(os.close, fd)
        return fd

    def open_path(self, stack: contextlib.ExitStack, root: Path, parts: tuple[str, ...]) -> int | None:
        """``root/parts...``, every step checked, or None when one is absent or skipped."""
        fd, shown = self.open_root(stack, root), root
        for part in parts:
            if fd is None:
                return None
            shown = shown / part
            fd = self.open(stack, fd, part, shown)
        return fd

    @contextlib.contextmanager
    def dir(self, parent: int, name: str, shown: Path) -> Iterator[int | None]:
        """:meth:`open` as a ``with`` block that closes the directory at its end."""
        with contextlib.ExitStack() as stack:
            yield self.open(stack, parent, name, shown)

    def list(self, fd: int, shown: Path) -> list[os.DirEntry]:
        """The entries of an open directory (none, and it is skipped, when it cannot be read)."""
        try:
            with os.scandir(fd) as it:
                return list(it)
        except OSError as exc:
            self.skip(shown, exc, "cannot read")
            return []

    # ---------------------------------------------------------------- removing
    def remove(self, parent: int, name: str, shown: Path) -> bool:
        """Remove ``name`` from ``parent`` and, for a directory of ours, everything under it;
        returns whether it is gone. A file or symlink is unlinked (never followed); a
        directory that is not ours to empty (not a private directory of ours, or unreadable)
        is removed only if it is empty already, and skipped otherwise."""
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.skip(shown, exc, "cannot look at")
            return False
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(name, dir_fd=parent)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.skip(shown, exc, "cannot remove")
                return False
            return True
        refused: BaseException | None = None
        try:
            fd = open_dir(name, str(shown), dir_fd=parent)
        except FileNotFoundError:
            return True
        except (UnsafeDirectory, OSError) as exc:
            refused = exc
        else:
            try:
                with os.scandir(fd) as it:
                    items = list(it)
            except OSError as exc:
                refused, items = exc, []
            try:
                gone = True
                for item in items:
                    gone = self.remove(fd, item.name, shown / item.name) and gone
            finally:
                os.close(fd)
            if not gone:
                return False   # what is left is reported already; the directory is not empty
        try:
            os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if refused is not None:
                self.skip(shown, refused, "cannot open")
            else:
                self.skip(shown, exc, "cannot remove")
            return False
        return True
