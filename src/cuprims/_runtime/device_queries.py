"""What the driver says about devices, pointers and streams: the current device (the
per-call question, answered through ctypes with pre-declared argument types), how many
devices there are, which device a pointer's memory or a stream belongs to, and each
device's attributes (compute capability and SM count, asked once per device).

Checks of arguments against these answers live in :mod:`.devices`; this module only asks.
"""

from __future__ import annotations

import ctypes
import threading

from cuprims._base import lazy
from cuprims._runtime import libcuda
from cuprims.errors import NoDeviceError

_P = ctypes.c_void_p
_tls = threading.local()
_device_props: dict[int, tuple[tuple[int, int], int]] = {}


def current_device() -> int:
    """Ordinal of the current context's device, making device 0's primary context current if none is."""
    lib = libcuda.load()
    box = getattr(_tls, "box", None)
    if box is None:
        box = _tls.box = ctypes.c_int()
    rc = lib.cuCtxGetDevice(ctypes.byref(box))
    if rc == 0:
        return box.value
    if rc in (libcuda.CUDA_ERROR_INVALID_CONTEXT, libcuda.CUDA_ERROR_NOT_INITIALIZED):
        Device = lazy.cuda_core().Device

        try:
            Device(0).set_current()
        except Exception as exc:
            raise NoDeviceError(f"no CUDA device could be made current: {exc}") from exc
        rc = lib.cuCtxGetDevice(ctypes.byref(box))
    libcuda.check("cuCtxGetDevice", rc)
    return box.value


_device_count: int | None = None


def device_count() -> int:
    """How many CUDA devices this process sees (``cuDeviceGetCount``; 0 without a usable
    driver), asked once. With one device, no argument's device is ever checked."""
    global _device_count
    if _device_count is None:
        try:
            lib = libcuda.load()
        except NoDeviceError:
            _device_count = 0
        else:
            count = ctypes.c_int()
            _device_count = count.value if lib.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0
    return _device_count


# CUpointer_attribute and CUmemorytype values (cuda.h)
_POINTER_MEMORY_TYPE, _POINTER_IS_MANAGED, _POINTER_DEVICE_ORDINAL = 2, 8, 9
_MEMORYTYPE_DEVICE = 2
SHARED_MEMORY = -1  # pointer_device's answer for memory every device reaches (managed, host)


def _pointer_query():
    state = getattr(_tls, "pointer_query", None)
    if state is None:
        values = (ctypes.c_uint * 3)()
        attrs = (ctypes.c_int * 3)(_POINTER_MEMORY_TYPE, _POINTER_IS_MANAGED, _POINTER_DEVICE_ORDINAL)
        data = (_P * 3)(*[ctypes.addressof(values) + 4 * i for i in range(3)])
        state = _tls.pointer_query = (values, attrs, data)
    return state


def pointer_device(ptr: int) -> int | None:
    """Ordinal of the device whose memory ``ptr`` points into; :data:`SHARED_MEMORY` for
    managed or host memory (every device reaches it); None where the driver does not know
    the pointer (or there is no driver)."""
    try:
        lib = libcuda.load()
    except NoDeviceError:
        return None
    values, attrs, data = _pointer_query()
    values[0] = values[1] = 0
    values[2] = 0xFFFFFFFF
    if not ptr or lib.cuPointerGetAttributes(3, attrs, data, ptr):
        return None
    memory_type, managed, ordinal = values[0], values[1] & 0xFF, ctypes.c_int(values[2]).value
    if managed or (memory_type and memory_type != _MEMORYTYPE_DEVICE):
        return SHARED_MEMORY
    if memory_type != _MEMORYTYPE_DEVICE or ordinal < 0:
        return None
    return ordinal


def stream_device(stream: int) -> int | None:
    """Ordinal of the device stream handle ``stream`` belongs to (None where the driver
    cannot say: an invalid handle, whose launch will report it). The legacy and
    per-thread default streams (0, 1, 2) are the current device's."""
    if stream in (0, 1, 2):
        return current_device()
    lib = libcuda.load()
    device = ctypes.c_int()
    get_device = libcuda.stream_get_device
    if get_device is not None and get_device(stream, ctypes.byref(device)) == 0:
        return device.value
    ctx = _P()
    if lib.cuStreamGetCtx(stream, ctypes.byref(ctx)) or not ctx.value:
        return None
    # the context's device: make it current for a moment (cuCtxGetDevice asks the current one)
    if lib.cuCtxPushCurrent_v2(ctx):
        return None
    try:
        rc = lib.cuCtxGetDevice(ctypes.byref(device))
    finally:
        lib.cuCtxPopCurrent_v2(ctypes.byref(_P()))
    return None if rc else device.value


# CUdevice_attribute values (cuda.h)
ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
ATTRIBUTE_L2_CACHE_SIZE = 38
_ATTRIBUTE_CC_MAJOR, _ATTRIBUTE_CC_MINOR = 75, 76


def device_attribute(attribute: int, device: int) -> int:
    """``cuDeviceGetAttribute`` (cuda.h's CUdevice_attribute numbering)."""
    value = ctypes.c_int()
    libcuda.check("cuDeviceGetAttribute", libcuda.load().cuDeviceGetAttribute(ctypes.byref(value), attribute, device))
    return value.value


def _properties(device: int) -> tuple[tuple[int, int], int]:
    props = _device_props.get(device)
    if props is None:
        cc = (device_attribute(_ATTRIBUTE_CC_MAJOR, device), device_attribute(_ATTRIBUTE_CC_MINOR, device))
        props = (cc, device_attribute(ATTRIBUTE_MULTIPROCESSOR_COUNT, device))
        _device_props[device] = props
    return props


def compute_capability(device: int) -> tuple[int, int]:
    """(major, minor) of ``device``, asked once."""
    return _properties(device)[0]


def sm_count(device: int) -> int:
    """How many multiprocessors ``device`` has, asked once."""
    return _properties(device)[1]
