"""Stream-ordered device memory for one-shot calls' temporary storage: one memory pool per
device, ours alone, that keeps what it has freed (:func:`alloc_async`, :func:`free_async`),
and :func:`trim_pools`, which gives that memory back (``clear_all_caches()``).

With the default pool (release threshold 0) every synchronisation returned the memory to
the driver, and the next call of a large sort mapped it again (about 0.1 ms a call for a
2^26-key merge sort); ours keep it, and no other user's pool changes.
"""

from __future__ import annotations

import ctypes
import threading

from cuprims._base import lazy
from cuprims._runtime import device_queries, libcuda
from cuprims.errors import CudaError

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
    """Give the memory our pools keep back to the driver, once the work queued on the
    current device so far (the frees among it) has run."""
    if not _pools:
        return
    lib = libcuda.load()
    # A block freed in stream order stays the pool's until its stream reaches the free, and
    # the trim gives back only what no allocation holds: let the frees queued so far (the
    # shared one-shot buffer's, just now) happen first.
    context = ctypes.c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(context)) == 0 and context.value:
        lib.cuCtxSynchronize()
    for pool in list(_pools.values()):
        if pool != _NO_POOL:
            lib.cuMemPoolTrimTo(ctypes.c_void_p(pool), ctypes.c_size_t(0))


def alloc_async(nbytes: int, stream: int, device: int = -1) -> int:
    """``nbytes`` of device memory, ordered on ``stream``, from ``device``'s pool (the
    current device's when -1)."""
    lib = libcuda.load()
    out = ctypes.c_uint64()
    pool = _pool(device_queries.current_device() if device < 0 else device)
    if pool != _NO_POOL:
        rc = lib.cuMemAllocFromPoolAsync(ctypes.byref(out), nbytes, ctypes.c_void_p(pool), stream)
        call = "cuMemAllocFromPoolAsync"
    else:
        rc = lib.cuMemAllocAsync(ctypes.byref(out), nbytes, stream)
        call = "cuMemAllocAsync"
    if rc:
        raise CudaError(call, libcuda.error_name(rc), f"{nbytes} bytes")
    return out.value


def free_async(ptr: int, stream: int) -> None:
    """Free ``ptr`` (from :func:`alloc_async`), ordered on ``stream``."""
    rc = libcuda.lib.cuMemFreeAsync(ptr, stream)
    if rc:
        raise CudaError("cuMemFreeAsync", libcuda.error_name(rc))
