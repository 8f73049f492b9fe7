"""The in-memory cache level: a single-flight LRU. Concurrent misses of one key build
once: the first caller builds, the others wait and receive the same result or the same
exception; failures are not cached. The on-disk level is :mod:`cuprims._cache.disk`."""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable

from cuprims._base import stats


class _Pending:
    """One build in flight: the value or exception its owner sets, for the threads that
    wait on it. (Not concurrent.futures.Future: importing it brings logging, ~4 ms of a
    warm process's first build on the CPU machine.)"""

    __slots__ = ("_done", "_value", "_error", "owner")

    def __init__(self) -> None:
        self.owner = threading.get_ident()     # the thread that builds it
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self._value = value
        self._done.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def result(self) -> Any:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class SingleFlightLRU:
    """A bounded mapping whose misses are built once, however many threads ask at once."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._inflight: dict[Any, _Pending] = {}
        self._lock = threading.Lock()
        _caches.add(self)

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
                future = _Pending()
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


_caches: weakref.WeakSet[SingleFlightLRU] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # Only the forking thread lives on in a child: a build another thread was running
    # never finishes here (whoever asks for it builds it again), and a lock such a thread
    # held at the fork would never be released.
    me = threading.get_ident()
    for cache in list(_caches):
        cache._lock = threading.Lock()
        cache._inflight = {k: p for k, p in cache._inflight.items() if p.owner == me}


os.register_at_fork(after_in_child=_after_fork_in_child)
