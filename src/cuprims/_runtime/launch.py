"""Kernel launches, plain (:func:`launch`) and with programmatic dependent launch
(:func:`launch_pdl`), both one ``cuLaunchKernelEx`` call through ctypes.

The per-call path: a launch passes four pointers across the FFI (the launch
configuration, the kernel, the parameter block packed by :class:`.params.ParamPack` and
no extras). Each launch shape (grid, block, stream, shared memory, PDL) has its
configuration made once and kept; only :data:`MAX_SHAPES` of them are kept, and a
shape past those writes this thread's own configuration at each launch. Measured on an
H100 host, this costs about 0.7 us less per launch than cuda.bindings' ``cuLaunchKernel``
(whose eleven arguments each go through a conversion helper) and 2 us less than the same
call through ctypes.

Kernels are the context-independent ``CUkernel`` handles of :class:`.modules.Module`
(plain ints): the driver launches each in the current context.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from cuprims._runtime import libcuda
from cuprims.errors import CudaError

_P = ctypes.c_void_p
_U = ctypes.c_uint

_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6   # CUlaunchAttributeID (cuda.h)
_CUDA_ERROR_INVALID_VALUE = 1
_CUDA_ERROR_NOT_SUPPORTED = 801

#: Launch shapes whose configuration is kept (about 100 bytes each).
MAX_SHAPES = 1024


class _LaunchAttribute(ctypes.Structure):
    # CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte union (the flag is its first int)
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    # CUlaunchConfig
    _fields_ = [("gridDimX", _U), ("gridDimY", _U), ("gridDimZ", _U), ("blockDimX", _U), ("blockDimY", _U),
                ("blockDimZ", _U), ("sharedMemBytes", _U), ("hStream", _P),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", _U)]


_PDL = _LaunchAttribute(id=_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
# (grid, block, stream, shared, pdl) -> address of its configuration; the configurations
# themselves live in _kept (never freed: another thread may be passing one to the driver)
_configs: dict[tuple[int, int, int, int, bool], int] = {}
_kept: list[_LaunchConfig] = []
_own = threading.local()      # a thread's configuration for shapes past MAX_SHAPES
_lock = threading.Lock()


def _fill(cfg: _LaunchConfig, grid: int, block: int, stream: int, shared: int, pdl: bool) -> None:
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block, 1, 1
    cfg.sharedMemBytes, cfg.hStream = shared, stream or None
    cfg.attrs = ctypes.pointer(_PDL) if pdl else None
    cfg.numAttrs = 1 if pdl else 0


def config_address(grid: int, block: int, stream: int, shared: int = 0, pdl: bool = False) -> int:
    """Address of a ``CUlaunchConfig`` for this launch shape (made on first use)."""
    key = (grid, block, stream, shared, pdl)
    address = _configs.get(key)
    if address is not None:
        return address
    with _lock:
        address = _configs.get(key)
        if address is not None:
            return address
        if len(_configs) < MAX_SHAPES:
            cfg = _LaunchConfig()
            _fill(cfg, grid, block, stream, shared, pdl)
            _kept.append(cfg)
            address = _configs[key] = ctypes.addressof(cfg)
            return address
    cfg = getattr(_own, "cfg", None)
    if cfg is None:
        cfg = _own.cfg = _LaunchConfig()
    _fill(cfg, grid, block, stream, shared, pdl)
    return ctypes.addressof(cfg)


def _launch_ex(config: int, kernel: int, params: int, extra: Any) -> int:  # bound on first use
    global _launch_ex
    _launch_ex = libcuda.load().cuLaunchKernelEx
    return _launch_ex(config, kernel, params, extra)


def launch(kernel: int, grid: int, block: int, stream: int, params: int, shared: int = 0) -> None:
    """Launch ``kernel`` (a handle of :attr:`.modules.Module.kernels`) on ``stream`` with the
    ``void*[]`` at ``params`` (from :meth:`.params.ParamPack.pack`)."""
    address = _configs.get((grid, block, stream, shared, False))
    if address is None:
        address = config_address(grid, block, stream, shared)
    err = _launch_ex(address, kernel, params, None)
    if err:
        raise CudaError("cuLaunchKernelEx", libcuda.error_name(err), f"grid={grid}, block={block}")


def launch_pdl(kernel: int, grid: int, block: int, stream: int, params: int) -> bool:
    """Launch with programmatic dependent launch (sm_90+: the kernel's blocks may be
    scheduled while the previous kernel on the stream finishes, and wait for it with
    griddepcontrol.wait before touching its results). Where the driver or the device
    cannot, launch plainly (same results, a little more latency) and return False, so the
    caller may stop asking on this device. Any other failure raises CudaError."""
    address = _configs.get((grid, block, stream, 0, True))
    if address is None:
        address = config_address(grid, block, stream, 0, True)
    try:
        err = _launch_ex(address, kernel, params, None)
    except ctypes.ArgumentError:
        err = -1   # not a kernel handle ctypes can pass
    if err in (-1, _CUDA_ERROR_INVALID_VALUE, _CUDA_ERROR_NOT_SUPPORTED):
        launch(kernel, grid, block, stream, params)
        return False
    if err:
        raise CudaError("cuLaunchKernelEx", libcuda.error_name(err), f"grid={grid}, block={block}, PDL")
    return True
