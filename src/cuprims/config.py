"""cuprims' settings: one typed object, :data:`settings`, and the only reader of ``CUPRIMS_*``.

==============================  ========================  =========================================
environment variable            ``settings.``             meaning
==============================  ========================  =========================================
``CUPRIMS_CACHE_DIR``           ``cache_dir``             where compiled code is kept on disk
                                                          (default ``$XDG_CACHE_HOME/cuprims``,
                                                          else ``~/.cache/cuprims``)
``CUPRIMS_DISK_CACHE``          ``disk_cache``            ``0`` turns the on-disk cache off
``CUPRIMS_CACHE_MAX_BYTES``     ``cache_max_bytes``       the on-disk cache's size cap (default
                                                          2 GiB; a whole number of bytes, or with a
                                                          K, M, G or T suffix, powers of 1024: 20M,
                                                          see :func:`parse_byte_size`); past it the
                                                          least recently used entries are evicted
``CUPRIMS_CACHE_LOCK_TIMEOUT``  ``cache_lock_timeout``    how many seconds a build waits for
                                                          another process's lock on the same cache
                                                          entry (default 60; a number > 0); past it
                                                          the build goes on without the lock
``CUPRIMS_DUMP_DIR``            ``dump_dir``              when set, every generated ``.cu`` file is
                                                          written there
``CUPRIMS_MEMORY_CACHE``        ``memory_cache``          how many build results the in-process
                                                          cache keeps (default 256)
``CUPRIMS_TRACE``               ``trace``                 ``1`` prints each build stage and its
                                                          duration to stderr
``CUPRIMS_PDL``                 ``pdl``                   ``0`` launches multi-kernel algorithms
                                                          without programmatic dependent launch
``CUPRIMS_RADIX_MEMSET``        ``radix_memset``          ``0`` clears radix sort's look-back flags
                                                          with a kernel instead of the driver's
                                                          memset
``CUPRIMS_PCH``                 ``pch``                   ``0`` compiles every unit without NVRTC
                                                          precompiled headers (see ``_compile/pch.py``)
``CUPRIMS_PCH_DISK``            ``pch_disk``              ``0`` keeps precompiled headers within
                                                          the process instead of in the disk cache
``CUPRIMS_DIRECT_OPS``          ``direct_ops``            ``0`` compiles every Python operator with
                                                          numba-cuda; by default a small expression
                                                          (``a + b``, ``max(a, b)``,
                                                          ``v % 2 == 0``) is written as C++ into the
                                                          generated unit instead (same results, no
                                                          numba; see ``_operators/py_expr.py``). Read
                                                          when an operator is described
``CUPRIMS_DIRECT_CUBIN``        ``direct_cubin``          ``0`` links every unit with nvJitLink; by
                                                          default a unit with nothing to link
                                                          (built-in and translated operators only)
                                                          is compiled by NVRTC straight to its
                                                          cubin (the same machine code, no LTO
                                                          link). Read when a unit is built
``CUPRIMS_DASK_IPC``            ``dask_ipc``              ``0`` sends every piece of a
                                                          ``cuprims.dask`` sort between the worker
                                                          processes of one machine as host bytes
                                                          instead of by CUDA IPC handle (set it in
                                                          the workers)
``CUPRIMS_DASK_IPC_MAPPINGS``   ``dask_ipc_mappings``     how many mappings of other processes'
                                                          allocations a worker keeps open when no
                                                          copy uses them (default 32; a whole
                                                          number >= 0, 0 closes each after its
                                                          copy)
==============================  ========================  =========================================

A setting assigned in code (``cuprims.settings.pdl = False``) wins over its environment
variable until it is deleted (``del cuprims.settings.pdl``) or the :meth:`Settings.override`
block that set it ends; otherwise the variable is read when the value is asked for, so
tests and long-lived programs can change it. An unset or empty variable means the
default; text the setting cannot take (``CUPRIMS_PDL=maybe``) raises ArgumentError naming
the variable, as a bad value assigned in code names ``settings.<name>``. The launch choices (``pdl``,
``radix_memset``) are read by an algorithm object when it first runs on a device and
again after any setting is changed in code (``settings.version``), not on every call. Settings are process-wide choices made by the
user: nothing in cuprims changes one behind the user's back.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class BadValue(ValueError):
    """An environment variable's text that its setting cannot take; the message says what
    the setting expects."""


def _flag(default: bool) -> Callable[[str | None], bool]:
    def parse(text: str | None) -> bool:
        if not text or not text.strip():
            return default
        value = text.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise BadValue("1, true, yes or on (on), or 0, false, no or off (off)")

    return parse


def _path(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None


def _whole(default: int, minimum: int) -> Callable[[str | None], int]:
    """A whole number >= ``minimum``; unset or empty gives ``default``."""

    def parse(text: str | None) -> int:
        if not text or not text.strip():
            return default
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise BadValue(f"a whole number >= {minimum}")
        return value

    return parse


_DEFAULT_MAX_BYTES = 2 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_BYTE_SIZE = re.compile(r"([0-9]+)(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE)
_BYTE_SIZE_EXPECTED = ("a whole number of bytes >= 1, optionally with a K, M, G or T suffix (powers of 1024, "
                       "e.g. 500M)")

#: Seconds a build waits for another process's lock on the same disk cache entry before
#: it builds without it (``settings.cache_lock_timeout``).
DEFAULT_LOCK_TIMEOUT = 60.0


def parse_byte_size(text: str) -> int:
    """A byte count >= 1: whole digits, optionally followed by K, M, G or T (powers of 1024)
    and then an optional B or iB (``20M``, ``20MB``, ``20MiB``; ``1000`` or ``1000B`` bytes).
    Raises ValueError for anything else: a sign, a fraction (``1.5G``), zero, other text."""
    match = _BYTE_SIZE.fullmatch(text.strip())
    value = int(match[1]) * _UNITS[(match[2] or "").lower()] if match else 0
    if value < 1:
        raise BadValue(_BYTE_SIZE_EXPECTED)
    return value


def _bytes(text: str | None) -> int:
    """:func:`parse_byte_size` of the variable; unset or empty gives the 2 GiB default."""
    return parse_byte_size(text) if text and text.strip() else _DEFAULT_MAX_BYTES


def _seconds(text: str | None) -> float:
    """A finite number of seconds > 0; unset or empty gives :data:`DEFAULT_LOCK_TIMEOUT`."""
    if not text or not text.strip():
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise BadValue("a finite number of seconds > 0")
    return value


def _default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cuprims"


# What a setting of each type takes, for its errors.
_KIND_NAMES = {bool: "a bool (True or False)", int: "an int", float: "a number", Path: "a path (a str or a Path)"}


class _Setting:
    """One typed setting backed by an environment variable."""

    def __init__(self, env: str, parse: Callable[[str | None], Any], kind: type[Any],
                 fallback: Callable[[], Any] | None = None, optional: bool = False, minimum: int = 1):
        self.env, self.parse, self.kind, self.fallback, self.optional = env, parse, kind, fallback, optional
        self.minimum = minimum   # the least value an int setting takes
        self.name = ""

    @classmethod
    def whole(cls, env: str, default: int, minimum: int = 1) -> _Setting:
        """An int setting >= ``minimum``, in code and in its variable alike."""
        return cls(env, _whole(default, minimum), int, minimum=minimum)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        overrides = obj._overrides
        if self.name in overrides:
            return overrides[self.name]
        text = os.environ.get(self.env)
        try:
            value = self.parse(text)
        except BadValue as exc:
            from cuprims.errors import ArgumentError

            raise ArgumentError(self.env, f"{exc} (the environment variable behind settings.{self.name}; "
                                "unset it for the default)", text) from None
        if value is None and self.fallback is not None:
            value = self.fallback()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        if self.kind is Path and isinstance(value, str):
            value = Path(value).expanduser()
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not (isinstance(value, self.kind) or (value is None and self.optional)):
            from cuprims.errors import ArgumentTypeError

            raise ArgumentTypeError(f"settings.{self.name}", _KIND_NAMES[self.kind], value)
        # (bool is an int subclass)
        if self.kind is int and isinstance(value, int) and (isinstance(value, bool) or value < self.minimum):
            from cuprims.errors import ArgumentError

            raise ArgumentError(f"settings.{self.name}", f"an int >= {self.minimum}", value)
        if self.kind is float and isinstance(value, float) and not 0 < value < math.inf:
            from cuprims.errors import ArgumentError

            raise ArgumentError(f"settings.{self.name}", "a finite number > 0", value)
        obj._overrides[self.name] = value
        obj.version += 1

    def __delete__(self, obj: Any) -> None:
        obj._overrides.pop(self.name, None)
        obj.version += 1


class Settings:
    """cuprims' process-wide settings (see the module docstring for each one).

    Example::

        import cuprims
        cuprims.settings.disk_cache = False          # until deleted
        with cuprims.settings.override(pdl=False):   # restored when the block ends
            ...
        del cuprims.settings.disk_cache              # back to CUPRIMS_DISK_CACHE / the default
    """

    cache_dir = _Setting("CUPRIMS_CACHE_DIR", _path, Path, _default_cache_dir)
    disk_cache = _Setting("CUPRIMS_DISK_CACHE", _flag(True), bool)
    cache_max_bytes = _Setting("CUPRIMS_CACHE_MAX_BYTES", _bytes, int)
    cache_lock_timeout = _Setting("CUPRIMS_CACHE_LOCK_TIMEOUT", _seconds, float)
    dump_dir = _Setting("CUPRIMS_DUMP_DIR", _path, Path, optional=True)
    memory_cache = _Setting.whole("CUPRIMS_MEMORY_CACHE", 256)
    trace = _Setting("CUPRIMS_TRACE", _flag(False), bool)
    pdl = _Setting("CUPRIMS_PDL", _flag(True), bool)
    radix_memset = _Setting("CUPRIMS_RADIX_MEMSET", _flag(True), bool)
    pch = _Setting("CUPRIMS_PCH", _flag(True), bool)
    pch_disk = _Setting("CUPRIMS_PCH_DISK", _flag(True), bool)
    direct_ops = _Setting("CUPRIMS_DIRECT_OPS", _flag(True), bool)
    direct_cubin = _Setting("CUPRIMS_DIRECT_CUBIN", _flag(True), bool)
    dask_ipc = _Setting("CUPRIMS_DASK_IPC", _flag(True), bool)
    dask_ipc_mappings = _Setting.whole("CUPRIMS_DASK_IPC_MAPPINGS", 32, minimum=0)

    def __init__(self) -> None:
        self._overrides: dict[str, Any] = {}
        # bumped whenever a setting is assigned or restored in code, so that launch
        # plans can re-read launch choices (pdl, radix_memset) only when they changed
        self.version = 0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(n for n, v in vars(cls).items() if isinstance(v, _Setting))

    @contextlib.contextmanager
    def override(self, **values: Any) -> Iterator["Settings"]:
        """Set ``values`` for the duration of a ``with`` block, then restore what was there."""
        unknown = set(values) - set(self.names())
        if unknown:
            from cuprims.errors import ArgumentError

            raise ArgumentError(sorted(unknown)[0], f"one of the settings {', '.join(self.names())}",
                                "an unknown setting")
        saved = dict(self._overrides)
        try:
            for name, value in values.items():
                setattr(self, name, value)
            yield self
        finally:
            self._overrides.clear()
            self._overrides.update(saved)
            self.version += 1

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.names()) + ")"


settings = Settings()


# The functions the pipeline calls (they read the one settings object).
def cache_dir() -> Path:
    return settings.cache_dir


def disk_cache_enabled() -> bool:
    return settings.disk_cache


def cache_max_bytes() -> int:
    return settings.cache_max_bytes


def cache_lock_timeout() -> float:
    return settings.cache_lock_timeout


def dump_dir() -> Path | None:
    return settings.dump_dir


def memory_cache_size() -> int:
    return settings.memory_cache


def trace_enabled() -> bool:
    return settings.trace
