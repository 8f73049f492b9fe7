"""Non-blocking CuPy streams for the GPU tests, ordered after the inputs the test made.

A stream made with ``non_blocking=True`` does not wait for the legacy default stream, where
a test makes its inputs (``cp.arange``, ``cp.random``, ``cp.zeros`` and ``cp.asarray``'s
host-to-device copy all return before the device has done them). A launch on such a
stream can therefore read inputs not yet written; it shows only when the GPU is busy, for
example beside a dozen other test workers. A user's program orders its streams the same way.
"""

from __future__ import annotations

from typing import Any


def side_stream(stream: Any = None) -> Any:
    """``stream`` (a new non-blocking CuPy stream where None), made to wait for the work
    queued so far on the current stream. Call it again after changing inputs on the current
    stream, before the next launch on ``stream``: for example ``stream = side_stream()``
    once the inputs are made, and ``side_stream(stream)`` after ``limit[0] = 2000``.
    """
    import cupy as cp

    if stream is None:
        stream = cp.cuda.Stream(non_blocking=True)
    stream.wait_event(cp.cuda.get_current_stream().record())
    return stream
