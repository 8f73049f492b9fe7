"""The in-memory cache level: a single-flight LRU. Concurrent misses of one key build
once: the first caller builds, the others wait and receive the same result or the same
exception; failures are not cached. The on-disk level is :mod:`cuprims._jit.disk_cache`."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable

from . import stats


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
