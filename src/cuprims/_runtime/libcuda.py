"""libcuda through ctypes: loading it once, declaring the prototypes of every call cuprims
makes, and turning its error codes into names.

The other driver modules (:mod:`.device_queries`, :mod:`.modules`, :mod:`.launch`,
:mod:`.pools`) call :func:`load` for the library, or read :data:`lib` on the per-call path
where a loaded kernel or allocation proves it is loaded already. Cold paths (loading code,
asking about the device) go through ctypes rather than cuda.bindings, whose import (tens of
ms: it brings cuda.pathfinder) would otherwise be the larger part of a deserialized
object's first call.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

from cuprims.errors import CudaError, NoDeviceError

#: The loaded library (``ctypes.CDLL``), set by the first :func:`load`; None before.
lib: Any = None
_init_lock = threading.Lock()

CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NOT_INITIALIZED = 3

#: cuStreamGetDevice: CUDA 12.8+ drivers; None on older ones (then the stream's context, then its device)
stream_get_device: Any = None

_P = ctypes.c_void_p
_U = ctypes.c_uint


def load() -> Any:
    """The loaded libcuda, initialised (``cuInit``); NoDeviceError where there is no
    driver or no usable GPU."""
    global lib
    if lib is None:
        with _init_lock:
            if lib is None:
                name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
                try:
                    loaded = ctypes.CDLL(name)
                except OSError as exc:
                    raise NoDeviceError(f"no CUDA driver: {name} could not be loaded ({exc}); cuprims runs "
                                        "algorithms on an NVIDIA GPU") from exc
                loaded.cuCtxGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
                loaded.cuCtxGetDevice.restype = ctypes.c_int
                loaded.cuMemAllocAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p]
                loaded.cuMemAllocAsync.restype = ctypes.c_int
                loaded.cuMemFreeAsync.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
                loaded.cuMemFreeAsync.restype = ctypes.c_int
                loaded.cuMemAllocFromPoolAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                                           ctypes.c_void_p, ctypes.c_void_p]
                loaded.cuMemAllocFromPoolAsync.restype = ctypes.c_int
                loaded.cuMemPoolTrimTo.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                loaded.cuMemPoolTrimTo.restype = ctypes.c_int
                loaded.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
                loaded.cuGetErrorName.restype = ctypes.c_int
                _declare_cold_path(loaded)
                rc = loaded.cuInit(0)
                if rc != 0:
                    raise NoDeviceError(f"cuInit failed with CUDA error {rc}: no usable GPU")
                lib = loaded
    return lib


def _declare_cold_path(loaded: Any) -> None:
    """Prototypes of the calls that load code and ask about the device."""
    protos = {
        "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
        "cuLibraryLoadData": [ctypes.POINTER(_P), ctypes.c_char_p, _P, _P, _U, _P, _P, _U],
        "cuLibraryGetKernel": [ctypes.POINTER(_P), _P, ctypes.c_char_p],
        "cuLibraryUnload": [_P],
        "cuKernelGetFunction": [ctypes.POINTER(_P), _P],
        "cuOccupancyMaxActiveBlocksPerMultiprocessor": [ctypes.POINTER(ctypes.c_int), _P, ctypes.c_int,
                                                        ctypes.c_size_t],
        "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
        "cuLaunchKernelEx": [_P, _P, _P, _P],
        # which device a pointer or a stream belongs to (asked only with several devices)
        "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],
        "cuPointerGetAttributes": [_U, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_P), ctypes.c_uint64],
        "cuStreamGetCtx": [_P, ctypes.POINTER(_P)],
        "cuCtxPushCurrent_v2": [_P],
        "cuCtxPopCurrent_v2": [ctypes.POINTER(_P)],
    }
    for name, argtypes in protos.items():
        fn = getattr(loaded, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    global stream_get_device
    try:
        fn = loaded.cuStreamGetDevice
    except AttributeError:
        fn = None
    else:
        fn.argtypes, fn.restype = [_P, ctypes.POINTER(ctypes.c_int)], ctypes.c_int
    stream_get_device = fn


def error_name(code: int) -> str:
    """The driver's name of error ``code`` (``CUDA_ERROR_...``)."""
    out = ctypes.c_char_p()
    if load().cuGetErrorName(code, ctypes.byref(out)) == 0 and out.value:
        return out.value.decode()
    return f"CUDA error {code}"


def check(call: str, code: int) -> None:
    """Raise CudaError naming ``call`` unless ``code`` is success."""
    if code:
        raise CudaError(call, error_name(code))
