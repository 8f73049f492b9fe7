"""Loaded code: a cubin loaded as a context-independent CUDA library, its kernel handles by
name expression, and their occupancy.

Each device loads its own copy (``algorithms.common.Builds.loaded``).
"""

from __future__ import annotations

import ctypes
from typing import Any

from cuprims._runtime import libcuda
from cuprims.errors import CudaError

_P = ctypes.c_void_p


class Module:
    """A cubin loaded as a context-independent CUDA library, with kernel handles by name.
    Each device loads its own copy (see ``algorithms.common.Builds.loaded``), so a
    handle is only ever launched on the device it was loaded for.

    ``kernels`` holds what :func:`.launch.launch` takes: the ``CUkernel`` handles (ints)."""

    def __init__(self, cubin: bytes, lowered: dict[str, str], device: int = -1):
        lib = libcuda.load()
        self.device = device  # the device this copy is loaded for (its plans launch only there)
        library = _P()
        libcuda.check("cuLibraryLoadData",
                      lib.cuLibraryLoadData(ctypes.byref(library), cubin, None, None, 0, None, None, 0))
        self._library = library.value
        self.kernels: dict[str, int] = {}
        for expr, name in lowered.items():
            kernel = _P()
            rc = lib.cuLibraryGetKernel(ctypes.byref(kernel), self._library, name.encode())
            if rc:
                raise CudaError("cuLibraryGetKernel", libcuda.error_name(rc), name)
            self.kernels[expr] = kernel.value

    def max_active_blocks(self, expr: str, block: int, dynamic_smem: int = 0) -> int:
        """Occupancy of kernel ``expr`` on the current device."""
        lib = libcuda.load()
        func, blocks = _P(), ctypes.c_int()
        libcuda.check("cuKernelGetFunction", lib.cuKernelGetFunction(ctypes.byref(func), self.kernels[expr]))
        libcuda.check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                      lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), func, block,
                                                                      dynamic_smem))
        return blocks.value

    def __del__(self):  # pragma: no cover - depends on interpreter shutdown order
        try:
            libcuda.lib.cuLibraryUnload(self._library)
        except Exception:
            pass
