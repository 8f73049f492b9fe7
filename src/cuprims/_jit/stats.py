"""Process-wide counters behind ``cuprims.cache_info()``."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_counts: dict[str, int] = {
    "numba_compiles": 0,
    "nvrtc_compiles": 0,
    "links": 0,
    "memory_hits": 0,
    "memory_misses": 0,
    "disk_hits": 0,
    "disk_misses": 0,
    "disk_writes": 0,
    "disk_corrupt_discarded": 0,
}


def bump(name: str, by: int = 1) -> None:
    with _lock:
        _counts[name] = _counts.get(name, 0) + by


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def reset() -> None:
    with _lock:
        for k in _counts:
            _counts[k] = 0
