"""The one place that reads cuprims' environment variables.

=========================  =============================================================
``CUPRIMS_CACHE_DIR``      where compiled code is kept on disk (default
                           ``$XDG_CACHE_HOME/cuprims``, else ``~/.cache/cuprims``)
``CUPRIMS_DISK_CACHE``     ``0`` turns the on-disk cache off
``CUPRIMS_DUMP_DIR``       when set, every generated ``.cu`` file is written there
``CUPRIMS_MEMORY_CACHE``   how many build results the in-process cache keeps (default 256)
``CUPRIMS_TRACE``          ``1`` prints each build stage and its duration to stderr
=========================  =============================================================

Values are read when asked for, so tests and long-lived programs can change them.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("CUPRIMS_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cuprims"


def disk_cache_enabled() -> bool:
    return os.environ.get("CUPRIMS_DISK_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def dump_dir() -> Path | None:
    value = os.environ.get("CUPRIMS_DUMP_DIR")
    return Path(value).expanduser() if value else None


def memory_cache_size() -> int:
    try:
        return max(1, int(os.environ.get("CUPRIMS_MEMORY_CACHE", "256")))
    except ValueError:
        return 256


def trace_enabled() -> bool:
    return os.environ.get("CUPRIMS_TRACE", "0").strip().lower() in ("1", "true", "yes", "on")
