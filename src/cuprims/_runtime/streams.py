"""Stream arguments -> the raw ``CUstream`` handle (an int). ``None`` is the legacy default stream.

In a process that sees several devices, a stream of another device than the current one
raises :class:`~cuprims.errors.DeviceMismatchError` (see :mod:`cuprims._runtime.devices`); with
one device nothing is checked.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from cuprims._runtime import devices
from cuprims.errors import ArgumentTypeError

_readers: dict[type, Callable[[Any, str], int]] = {}
# whether an int handle may need its device checked: true until the device count says one device
_check_ints = True


def _forget_readers() -> None:
    global _check_ints
    _readers.clear()
    _check_ints = True


devices.on_reset(_forget_readers)


def _from_protocol(s: Any, name: str) -> int:
    got = s.__cuda_stream__()
    try:
        if type(got) is not tuple or len(got) != 2 or any(isinstance(v, bool) for v in got):
            raise TypeError
        handle = operator.index(got[1])
        operator.index(got[0])
        if handle < 0:
            raise TypeError
    except TypeError:
        raise ArgumentTypeError(name, "an object whose __cuda_stream__() returns a (version, handle) pair of "
                                "integers", f"{type(s).__name__} whose __cuda_stream__() returned {got!r}") from None
    return handle


def _from_ptr(s: Any, name: str) -> int:
    return int(s.ptr)


def _from_cuda_stream(s: Any, name: str) -> int:
    return int(s.cuda_stream)


def _from_handle(s: Any, name: str) -> int:
    return int(getattr(s.handle, "value", s.handle) or 0)


def _reader_for(tp: type) -> Callable[[Any, str], int] | None:
    if hasattr(tp, "__cuda_stream__"):
        return _from_protocol
    mod = tp.__module__ or ""
    if mod.startswith("cupy") and hasattr(tp, "ptr"):
        return _from_ptr
    if mod.startswith("torch") and hasattr(tp, "cuda_stream"):
        return _from_cuda_stream
    if hasattr(tp, "handle") and mod.startswith("numba"):
        return _from_handle
    return None


def _check_int(stream: int, name: str) -> None:
    global _check_ints
    if not devices.several():
        _check_ints = False
        return
    devices.check_stream(stream, stream, name, devices.handle_device)


def stream_handle(stream: Any, name: str = "stream") -> int:
    if stream is None:
        return 0
    tp = type(stream)
    if tp is int:
        if stream < 0:
            raise ArgumentTypeError(name, "a stream object or a non-negative stream handle", stream)
        if _check_ints and stream > 2:
            _check_int(stream, name)
        return stream
    reader = _readers.get(tp)
    if reader is None:
        reader = _reader_for(tp)
        if reader is None:
            raise ArgumentTypeError(name, "an object with __cuda_stream__, a CuPy or PyTorch stream, "
                                    "an int handle or None", stream)
        if devices.several():
            reader = devices.checked_stream_reader(reader, stream)
        _readers[tp] = reader
    return reader(stream, name)
