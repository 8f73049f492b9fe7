"""Which device an array or a stream argument belongs to, checked against the current one.

Only a process that sees more than one CUDA device checks anything (:func:`several`,
from the driver's device count, asked once): there the per-type array readers of
:mod:`cuprims._runtime.arrays` and stream readers of :mod:`cuprims._runtime.streams` are registered
wrapped by the check, so a one-GPU process runs the very readers it ran before (its
per-call path gains nothing). A mismatch raises
:class:`~cuprims.errors.DeviceMismatchError` before anything is launched.

How each kind of argument tells its device, cheapest first:

* CuPy arrays: ``x.data.device_id``; PyTorch tensors: ``x.get_device()``; DLPack:
  ``__dlpack_device__()``; any other CUDA Array Interface array: its pointer, through
  ``cuPointerGetAttributes`` (device ordinal; managed and host memory reach every device
  and are never refused).
* CuPy streams: ``.device_id``; PyTorch streams: ``.device_index``; a ``__cuda_stream__``
  object, a numba stream or an int handle: ``cuStreamGetDevice`` (older drivers: the
  stream's context's device). The legacy and per-thread default streams (handles 0, 1,
  2) are the current device's.
"""

from __future__ import annotations

from typing import Any, Callable

from cuprims._runtime import driver
from cuprims.errors import DeviceMismatchError

_several: bool | None = None


def several() -> bool:
    """Whether this process sees more than one CUDA device (decided once)."""
    global _several
    if _several is None:
        _several = driver.device_count() > 1
    return _several


def reset(several_devices: bool | None = None) -> None:
    """Decide the gate again (``None``: from the device count at the next use; a bool:
    as given) and forget the readers chosen under the old one. For tests that fake a
    second device; not thread-safe against concurrent calls. Objects that already ran
    keep the plan lookup they took (make new ones: ``cuprims.clear_all_caches()``)."""
    global _several
    _several = several_devices
    for forget in _on_reset:
        forget()


# What the readers of arrays and streams register (see :func:`on_reset`): this module
# imports neither of them, they import it.
_on_reset: list[Callable[[], None]] = []


def on_reset(forget: Callable[[], None]) -> None:
    """Call ``forget`` whenever :func:`reset` decides the gate again (the array and stream
    readers' modules register how to drop the readers they chose under the old one)."""
    _on_reset.append(forget)


# ------------------------------------------------------------------ arrays

def cupy_device(x: Any, ptr: int) -> int | None:
    return x.data.device_id


def torch_device(x: Any, ptr: int) -> int | None:
    return x.get_device()


_DL_CUDA = 2  # kDLCUDA (kDLCUDAHost and kDLCUDAManaged memory reach every device)


def dlpack_device(x: Any, ptr: int) -> int | None:
    kind, device = x.__dlpack_device__()
    return int(device) if kind == _DL_CUDA else None


def pointer_device(x: Any, ptr: int) -> int | None:
    device = driver.pointer_device(ptr)
    return None if device is None or device == driver.SHARED_MEMORY else device


def device_reader(read: Callable[..., Any]) -> Callable[[Any, int], int | None]:
    """How to learn the device of an array that ``read`` (one of ``_arrays``' readers) reads."""
    name = getattr(read, "__name__", "")
    if name.startswith("_read_cupy"):
        return cupy_device
    if name == "_read_torch":
        return torch_device
    if name == "_read_dlpack":
        return dlpack_device
    return pointer_device


def checked_array_reader(read: Callable[[Any, str], tuple]) -> Callable[[Any, str], tuple]:
    """``read`` followed by the device check (registered in place of ``read`` with several devices)."""
    device_of = device_reader(read)
    cheap = device_of is not pointer_device

    def read_checked(x: Any, name: str) -> tuple:
        info = read(x, name)
        device = device_of(x, info[0])
        if device is not None:
            current = driver.current_device()
            if device != current and not (cheap and driver.pointer_device(info[0]) == driver.SHARED_MEMORY):
                raise DeviceMismatchError(name, current, device, "array")
        return info

    read_checked.__name__ = f"{getattr(read, '__name__', 'reader')}_checked"
    read_checked.unchecked = read  # type: ignore[attr-defined]
    return read_checked


# ------------------------------------------------------------------ streams

def cupy_stream_device(s: Any, handle: int) -> int | None:
    device = s.device_id  # -1 where CuPy does not know (an external stream): ask the driver
    return device if device >= 0 else driver.stream_device(handle)


def torch_stream_device(s: Any, handle: int) -> int | None:
    index = getattr(s, "device_index", None)
    return s.device.index if index is None else index


def handle_device(s: Any, handle: int) -> int | None:
    return driver.stream_device(handle)


def stream_device_reader(s: Any) -> Callable[[Any, int], int | None]:
    mod = type(s).__module__ or ""
    if mod.startswith("cupy") and isinstance(getattr(s, "device_id", None), int):
        return cupy_stream_device
    if mod.startswith("torch") and (hasattr(s, "device_index") or hasattr(s, "device")):
        return torch_stream_device
    return handle_device


def check_stream(s: Any, handle: int, name: str, device_of: Callable[[Any, int], int | None]) -> None:
    """Raise unless stream ``s`` (handle ``handle``) belongs to the current device."""
    if handle in (0, 1, 2):  # the legacy or per-thread default stream: the current device's
        return
    device = device_of(s, handle)
    if device is not None and device >= 0:
        current = driver.current_device()
        if device != current:
            raise DeviceMismatchError(name, current, device, "stream")


def checked_stream_reader(read: Callable[[Any, str], int], s: Any) -> Callable[[Any, str], int]:
    """``read`` followed by the device check, for streams of ``s``'s type."""
    device_of = stream_device_reader(s)

    def read_checked(stream: Any, name: str) -> int:
        handle = read(stream, name)
        check_stream(stream, handle, name, device_of)
        return handle

    return read_checked
