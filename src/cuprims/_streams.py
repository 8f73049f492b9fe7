"""Stream arguments -> the raw ``CUstream`` handle (an int). ``None`` is the legacy default stream."""

from __future__ import annotations

from typing import Any, Callable

from .errors import ArgumentTypeError

_readers: dict[type, Callable[[Any], int]] = {}


def _from_protocol(s: Any) -> int:
    version, handle = s.__cuda_stream__()
    return int(handle)


def _reader_for(tp: type) -> Callable[[Any], int] | None:
    if hasattr(tp, "__cuda_stream__"):
        return _from_protocol
    mod = tp.__module__ or ""
    if mod.startswith("cupy") and hasattr(tp, "ptr"):
        return lambda s: int(s.ptr)
    if mod.startswith("torch") and hasattr(tp, "cuda_stream"):
        return lambda s: int(s.cuda_stream)
    if hasattr(tp, "handle") and mod.startswith("numba"):
        return lambda s: int(getattr(s.handle, "value", s.handle) or 0)
    return None


def stream_handle(stream: Any, name: str = "stream") -> int:
    if stream is None:
        return 0
    tp = type(stream)
    if tp is int:
        if stream < 0:
            raise ArgumentTypeError(name, "a stream object or a non-negative stream handle", stream)
        return stream
    reader = _readers.get(tp)
    if reader is None:
        reader = _reader_for(tp)
        if reader is None:
            raise ArgumentTypeError(name, "an object with __cuda_stream__, a CuPy or PyTorch stream, "
                                    "an int handle or None", stream)
        _readers[tp] = reader
    return reader(stream)
