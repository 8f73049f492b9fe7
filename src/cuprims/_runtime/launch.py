"""Kernel launches, plain (:func:`launch`) and with programmatic dependent launch
(:data:`launch_pdl`), each through cuda.bindings for a ``CUkernel`` handle and through
ctypes for a plain int one.

The per-call path: both take a parameter block packed by :class:`.params.ParamPack` and a
kernel handle from :class:`.modules.Module`, and cost well under the ~5 us of a cuda.core
``launch``.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from cuprims._base import lazy
from cuprims._runtime import libcuda
from cuprims.errors import CudaError

_P = ctypes.c_void_p
_U = ctypes.c_uint


def launch(kernel: Any, grid: int, block: int, stream: int, params: int, shared: int = 0) -> None:
    """Launch ``kernel`` (from :attr:`.modules.Module.kernels`) with a ``void*[]`` at ``params``.

    cuda.bindings' cuLaunchKernel takes the parameter array as a plain address and costs
    about 1.3 us less per call than the same driver call through ctypes (measured on the
    H200), so a ``CUkernel`` goes through it; a plain handle goes through ctypes."""
    if type(kernel) is int:
        err = libcuda.lib.cuLaunchKernel(kernel, grid, 1, 1, block, 1, 1, shared, stream, params, None)
    else:
        err = _cu_launch(kernel, grid, 1, 1, block, 1, 1, shared, stream, params, 0)[0]
    if err:
        raise CudaError("cuLaunchKernel", libcuda.error_name(int(err)), f"grid={grid}, block={block}")


def _cu_launch(*args):  # bound to cuda.bindings' cuLaunchKernel on first use
    global _cu_launch
    drv = lazy.driver_bindings()

    libcuda.load()
    _cu_launch = drv.cuLaunchKernel
    return _cu_launch(*args)


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
            raise CudaError("cuLaunchKernelEx", libcuda.error_name(err), f"grid={grid}, block={block}, PDL")
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
    return libcuda.lib.cuLaunchKernelEx(address, kernel, params, None)
