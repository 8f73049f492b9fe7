"""The CUDA driver: contexts, loading cubins, occupancy, and fast kernel launches.

Cold paths (loading, attributes) go through cuda.bindings; the per-call path
(current device, launch) calls libcuda through ctypes with pre-declared argument types,
which costs well under the ~5 us of a cuda.core ``launch``.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from typing import Any, Sequence

from cuprims._base import lazy
from cuprims.errors import CudaError, NoDeviceError

_lib = None
_init_lock = threading.Lock()
_device_props: dict[int, tuple[tuple[int, int], int]] = {}

CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NOT_INITIALIZED = 3


def _libcuda():
    global _lib
    if _lib is None:
        with _init_lock:
            if _lib is None:
                name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
                try:
                    lib = ctypes.CDLL(name)
                except OSError as exc:
                    raise NoDeviceError(f"no CUDA driver: {name} could not be loaded ({exc}); cuprims runs "
                                        "algorithms on an NVIDIA GPU") from exc
                lib.cuCtxGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
                lib.cuCtxGetDevice.restype = ctypes.c_int
                lib.cuMemAllocAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p]
                lib.cuMemAllocAsync.restype = ctypes.c_int
                lib.cuMemFreeAsync.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
                lib.cuMemFreeAsync.restype = ctypes.c_int
                lib.cuMemAllocFromPoolAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                                        ctypes.c_void_p, ctypes.c_void_p]
                lib.cuMemAllocFromPoolAsync.restype = ctypes.c_int
                lib.cuMemPoolTrimTo.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                lib.cuMemPoolTrimTo.restype = ctypes.c_int
                lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
                lib.cuGetErrorName.restype = ctypes.c_int
                _declare_cold_path(lib)
                rc = lib.cuInit(0)
                if rc != 0:
                    raise NoDeviceError(f"cuInit failed with CUDA error {rc}: no usable GPU")
                _lib = lib
    return _lib


_P = ctypes.c_void_p
_U = ctypes.c_uint


def _declare_cold_path(lib: Any) -> None:
    """Prototypes of the calls that load code and ask about the device. They go through
    ctypes rather than cuda.bindings, whose import (tens of ms: it brings cuda.pathfinder)
    would otherwise be the larger part of a deserialized object's first call."""
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
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    global _stream_get_device
    try:
        fn = lib.cuStreamGetDevice
    except AttributeError:
        fn = None
    else:
        fn.argtypes, fn.restype = [_P, ctypes.POINTER(ctypes.c_int)], ctypes.c_int
    _stream_get_device = fn


# cuStreamGetDevice: CUDA 12.8+ drivers; None on older ones (then the stream's context, then its device)
_stream_get_device = None


def error_name(code: int) -> str:
    out = ctypes.c_char_p()
    if _libcuda().cuGetErrorName(code, ctypes.byref(out)) == 0 and out.value:
        return out.value.decode()
    return f"CUDA error {code}"


def check(call: str, code: int) -> None:
    if code:
        raise CudaError(call, error_name(code))


_tls = threading.local()


def current_device() -> int:
    """Ordinal of the current context's device, making device 0's primary context current if none is."""
    lib = _libcuda()
    box = getattr(_tls, "box", None)
    if box is None:
        box = _tls.box = ctypes.c_int()
    rc = lib.cuCtxGetDevice(ctypes.byref(box))
    if rc == 0:
        return box.value
    if rc in (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_INITIALIZED):
        Device = lazy.cuda_core().Device

        try:
            Device(0).set_current()
        except Exception as exc:
            raise NoDeviceError(f"no CUDA device could be made current: {exc}") from exc
        rc = lib.cuCtxGetDevice(ctypes.byref(box))
    check("cuCtxGetDevice", rc)
    return box.value


_device_count: int | None = None


def device_count() -> int:
    """How many CUDA devices this process sees (``cuDeviceGetCount``; 0 without a usable
    driver), asked once. With one device, no argument's device is ever checked."""
    global _device_count
    if _device_count is None:
        try:
            lib = _libcuda()
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
        lib = _libcuda()
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
    lib = _libcuda()
    device = ctypes.c_int()
    if _stream_get_device is not None and _stream_get_device(stream, ctypes.byref(device)) == 0:
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
    check("cuDeviceGetAttribute", _libcuda().cuDeviceGetAttribute(ctypes.byref(value), attribute, device))
    return value.value


def _properties(device: int) -> tuple[tuple[int, int], int]:
    props = _device_props.get(device)
    if props is None:
        cc = (device_attribute(_ATTRIBUTE_CC_MAJOR, device), device_attribute(_ATTRIBUTE_CC_MINOR, device))
        props = (cc, device_attribute(ATTRIBUTE_MULTIPROCESSOR_COUNT, device))
        _device_props[device] = props
    return props


def compute_capability(device: int) -> tuple[int, int]:
    return _properties(device)[0]


def sm_count(device: int) -> int:
    return _properties(device)[1]


class Module:
    """A cubin loaded as a context-independent CUDA library, with kernel handles by name.
    Each device loads its own copy (see ``algorithms.common.Builds.loaded``), so a
    handle is only ever launched on the device it was loaded for.

    ``kernels`` holds what :func:`launch` takes: cuda.bindings ``CUkernel`` objects where
    cuda.bindings is already imported (its launch is the faster one), plain handles (ints,
    launched through ctypes) in a process that has not imported it, such as one that only
    deserializes built objects."""

    def __init__(self, cubin: bytes, lowered: dict[str, str], device: int = -1):
        lib = _libcuda()
        self.device = device  # the device this copy is loaded for (its plans launch only there)
        library = _P()
        check("cuLibraryLoadData", lib.cuLibraryLoadData(ctypes.byref(library), cubin, None, None, 0, None, None, 0))
        self._library = library.value
        drv = sys.modules.get("cuda.bindings.driver")
        self.kernels: dict[str, Any] = {}
        self._handles: dict[str, int] = {}
        for expr, name in lowered.items():
            kernel = _P()
            rc = lib.cuLibraryGetKernel(ctypes.byref(kernel), self._library, name.encode())
            if rc:
                raise CudaError("cuLibraryGetKernel", error_name(rc), name)
            self._handles[expr] = kernel.value
            self.kernels[expr] = drv.CUkernel(kernel.value) if drv is not None else kernel.value

    def max_active_blocks(self, expr: str, block: int, dynamic_smem: int = 0) -> int:
        """Occupancy of kernel ``expr`` on the current device."""
        lib = _libcuda()
        func, blocks = _P(), ctypes.c_int()
        check("cuKernelGetFunction", lib.cuKernelGetFunction(ctypes.byref(func), self._handles[expr]))
        check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
              lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), func, block, dynamic_smem))
        return blocks.value

    def __del__(self):  # pragma: no cover - depends on interpreter shutdown order
        try:
            _lib.cuLibraryUnload(self._library)
        except Exception:
            pass


def param_size(kind: Any) -> int:
    """The bytes a kernel parameter of ``kind`` (as :class:`ParamPack` takes it) occupies."""
    if kind in ("ptr", "i64"):
        return 8
    if kind == "i32":
        return 4
    return max(int(kind), 1)


class ParamPack:
    """Kernel arguments laid out once; each launch rewrites the values in place.

    ``kinds`` holds one entry per kernel parameter: "ptr" (device pointer), "i64",
    "i32", or an int N for N raw bytes (a by-value struct such as an init value).
    Buffers are per thread, so one algorithm object may be called from several threads.
    """

    def __init__(self, kinds: Sequence[Any]):
        fmt, offset, offsets = "<", 0, []
        for kind in kinds:
            offset = (offset + 15) & ~15
            offsets.append(offset)
            size = param_size(kind)
            code = {"ptr": "Q", "i64": "q", "i32": "i"}.get(kind, f"{size}s")
            fmt_pad = offset - _fmt_size(fmt)
            fmt += (f"{fmt_pad}x" if fmt_pad else "") + code
            offset += size
        self._struct = struct.Struct(fmt)
        self._offsets = offsets
        self._count = len(kinds)
        self._tls = threading.local()

    def _buffers(self):
        bufs = getattr(self._tls, "bufs", None)
        if bufs is None:
            storage = ctypes.create_string_buffer(max(self._struct.size, 1) + 16)
            base = ctypes.addressof(storage)
            pointers = (ctypes.c_void_p * max(self._count, 1))(*[base + o for o in self._offsets])
            bufs = self._tls.bufs = (storage, pointers, ctypes.addressof(pointers))
        return bufs

    def pack(self, *values: Any) -> int:
        """Write ``values`` and return the address of the ``void*[]`` for cuLaunchKernel."""
        storage, _, address = self._buffers()
        self._struct.pack_into(storage, 0, *values)
        return address


def _fmt_size(fmt: str) -> int:
    return struct.calcsize(fmt)


def launch(kernel: Any, grid: int, block: int, stream: int, params: int, shared: int = 0) -> None:
    """Launch ``kernel`` (from :attr:`Module.kernels`) with a ``void*[]`` at ``params``.

    cuda.bindings' cuLaunchKernel takes the parameter array as a plain address and costs
    about 1.3 us less per call than the same driver call through ctypes (measured on the
    H200), so a ``CUkernel`` goes through it; a plain handle goes through ctypes."""
    if type(kernel) is int:
        err = _lib.cuLaunchKernel(kernel, grid, 1, 1, block, 1, 1, shared, stream, params, None)
    else:
        err = _cu_launch(kernel, grid, 1, 1, block, 1, 1, shared, stream, params, 0)[0]
    if err:
        raise CudaError("cuLaunchKernel", error_name(int(err)), f"grid={grid}, block={block}")


def _cu_launch(*args):  # bound to cuda.bindings' cuLaunchKernel on first use
    global _cu_launch
    drv = lazy.driver_bindings()

    _libcuda()
    _cu_launch = drv.cuLaunchKernel
    return _cu_launch(*args)


# One memory pool per device for one-shot calls' temporary storage, keeping what it has
# freed: with the default pool (release threshold 0) every synchronisation returned the
# memory to the driver, and the next call of a large sort mapped it again (about 0.1 ms
# a call for a 2^26-key merge sort). Ours alone, so no other user's pool changes.
# clear_all_caches() trims them.
_pools: dict[int, int] = {}
_pool_lock = threading.Lock()
_NO_POOL = 0


def _pool(device: int) -> int:
    pool = _pools.get(device)
    if pool is not None:
        return pool
    with _pool_lock:
        pool = _pools.get(device)
        if pool is None:
            pool = _pools[device] = _create_pool(device)
    return pool


def _create_pool(device: int) -> int:
    try:
        drv = lazy.driver_bindings()
        props = drv.CUmemPoolProps()
        props.allocType = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = device
        err, pool = drv.cuMemPoolCreate(props)
        if int(err):
            return _NO_POOL
        err, = drv.cuMemPoolSetAttribute(pool, drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                         drv.cuuint64_t((1 << 64) - 1))
        if int(err):
            drv.cuMemPoolDestroy(pool)
            return _NO_POOL
        return int(pool)
    except Exception:  # noqa: BLE001 - no pools here (an old driver, a platform without them): the default one
        return _NO_POOL


def trim_pools() -> None:
    """Give the memory our pools keep back to the driver."""
    if not _pools:
        return
    lib = _libcuda()
    for pool in list(_pools.values()):
        if pool != _NO_POOL:
            lib.cuMemPoolTrimTo(ctypes.c_void_p(pool), ctypes.c_size_t(0))


def alloc_async(nbytes: int, stream: int, device: int = -1) -> int:
    """``nbytes`` of device memory, ordered on ``stream``, from ``device``'s pool (the
    current device's when -1)."""
    lib = _libcuda()
    out = ctypes.c_uint64()
    pool = _pool(current_device() if device < 0 else device)
    if pool != _NO_POOL:
        rc = lib.cuMemAllocFromPoolAsync(ctypes.byref(out), nbytes, ctypes.c_void_p(pool), stream)
        call = "cuMemAllocFromPoolAsync"
    else:
        rc = lib.cuMemAllocAsync(ctypes.byref(out), nbytes, stream)
        call = "cuMemAllocAsync"
    if rc:
        raise CudaError(call, error_name(rc), f"{nbytes} bytes")
    return out.value


def free_async(ptr: int, stream: int) -> None:
    rc = _lib.cuMemFreeAsync(ptr, stream)
    if rc:
        raise CudaError("cuMemFreeAsync", error_name(rc))


_CUDA_ERROR_INVALID_VALUE = 1
_CUDA_ERROR_NOT_SUPPORTED = 801


class _PdlLauncher:
    """cuLaunchKernelEx with the programmatic-stream-serialization attribute (programmatic
    dependent launch, sm_90+): the kernel's blocks may be scheduled while the previous
    kernel on the stream finishes, and wait for it (griddepcontrol.wait) before touching
    its results. One reusable launch configuration per thread."""

    def __init__(self) -> None:
        self._tls = threading.local()

    def _config(self) -> tuple:
        state = getattr(self._tls, "state", None)
        if state is None:
            drv = lazy.driver_bindings()
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            cfg = drv.CUlaunchConfig()
            cfg.gridDimY = cfg.gridDimZ = cfg.blockDimY = cfg.blockDimZ = 1
            cfg.sharedMemBytes = 0
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            state = self._tls.state = (cfg, drv.cuLaunchKernelEx, attr)
        return state

    def __call__(self, kernel: Any, grid: int, block: int, stream: int, params: int) -> bool:
        """Launch with PDL; where PDL cannot be expressed or is not supported, launch plainly
        (same results, a little more latency) and return False, so the caller may stop
        asking on this device. Any other failure raises CudaError."""
        try:
            if type(kernel) is int:
                err = _launch_pdl_ctypes(kernel, grid, block, stream, params)
            else:
                cfg, launch_ex, _ = self._config()
                cfg.gridDimX = grid
                cfg.blockDimX = block
                cfg.hStream = stream
                err = int(launch_ex(cfg, kernel, params, 0)[0])
        except (TypeError, ValueError, AttributeError, ImportError):
            err = -1  # these bindings cannot express the launch
        if err in (-1, _CUDA_ERROR_INVALID_VALUE, _CUDA_ERROR_NOT_SUPPORTED):
            launch(kernel, grid, block, stream, params)
            return False
        if err:
            raise CudaError("cuLaunchKernelEx", error_name(err), f"grid={grid}, block={block}, PDL")
        return True


launch_pdl = _PdlLauncher()

_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6   # CUlaunchAttributeID (cuda.h)


class _LaunchAttribute(ctypes.Structure):
    # CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte union (the flag is its first int)
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", _U), ("gridDimY", _U), ("gridDimZ", _U), ("blockDimX", _U), ("blockDimY", _U),
                ("blockDimZ", _U), ("sharedMemBytes", _U), ("hStream", _P),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", _U)]


_pdl_tls = threading.local()


def _launch_pdl_ctypes(kernel: int, grid: int, block: int, stream: int, params: int) -> int:
    state = getattr(_pdl_tls, "state", None)
    if state is None:
        attr = _LaunchAttribute(id=_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        cfg = _LaunchConfig(gridDimY=1, gridDimZ=1, blockDimY=1, blockDimZ=1, sharedMemBytes=0,
                            attrs=ctypes.pointer(attr), numAttrs=1)
        state = _pdl_tls.state = (cfg, attr, ctypes.addressof(cfg))
    cfg, _, address = state
    cfg.gridDimX, cfg.blockDimX, cfg.hStream = grid, block, stream
    return _lib.cuLaunchKernelEx(address, kernel, params, None)
