"""Temporary storage that one-shot calls on the legacy default stream share: a buffer per
device, so that such a call allocates and frees nothing (two driver calls, several
microseconds of host time on a call of a few thousand items).

The legacy default stream (``stream=None``) runs every call's kernels one after another,
so no two calls use the buffer at once. A call holds :data:`lock` from taking the buffer
until its last launch is queued; replacing the buffer with a larger one, or freeing it
(:func:`release`), happens under the same lock, so a buffer is only freed after every
launch that uses it is on the stream, where the free is ordered after them.
"""

from __future__ import annotations

import threading

from cuprims._runtime import driver
from cuprims.errors import CudaError, NoDeviceError

#: The most temporary bytes a one-shot call takes from the shared buffer; a larger need is
#: allocated and freed per call, its kernels outweighing the two driver calls.
MAX_BYTES = 1 << 20
_FIRST_BYTES = 4096

lock = threading.Lock()
#: The thread holding :data:`lock` (None: none). A call made while its own thread holds the
#: lock (from inside another call's launches) allocates its storage instead: it must not
#: share the buffer the outer call is using, nor wait for a lock its own thread holds.
holder: int | None = None
_buffers: dict[int, tuple[int, int]] = {}   # device -> (pointer, bytes)


def shared_buffer(nbytes: int, device: int) -> int:
    """At least ``nbytes`` of temporary storage on ``device`` for a one-shot call on the
    legacy default stream; the caller holds :data:`lock` until its launches are queued."""
    held = _buffers.get(device)
    if held is not None and held[1] >= nbytes:
        return held[0]
    size = max(nbytes, 2 * held[1] if held is not None else _FIRST_BYTES)
    ptr = driver.alloc_async(size, 0, device)
    if held is not None:
        driver.free_async(held[0], 0)   # ordered after the launches queued before it
    _buffers[device] = (ptr, size)
    return ptr


def release() -> None:
    """Free every shared buffer (``clear_all_caches()``). A buffer the driver cannot free
    went with its context (a reset device, a driver being unloaded): it is forgotten."""
    with lock:
        for ptr, _ in _buffers.values():
            try:
                driver.free_async(ptr, 0)
            except (CudaError, NoDeviceError):
                pass
        _buffers.clear()
