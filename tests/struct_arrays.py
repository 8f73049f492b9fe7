"""A device array of structs for the GPU tests: CuPy holds no structured dtype, so the
bytes live in a CuPy uint8 array and the CUDA Array Interface describes them as structs
(``typestr`` ``|V<size>`` and the dtype's ``descr``), the way a user hands struct arrays
from another library to cuprims."""

from __future__ import annotations

import numpy as np


class Structs:
    """A device array of ``host``'s struct values (a copy)."""

    def __init__(self, host: np.ndarray):
        import cupy as cp

        self.dtype, self.size = host.dtype, host.size
        self.raw = cp.asarray(np.ascontiguousarray(host).view(np.uint8).reshape(-1))

    @classmethod
    def empty(cls, n: int, dtype: np.dtype) -> "Structs":
        return cls(np.zeros(n, dtype))

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "typestr": f"|V{self.dtype.itemsize}", "descr": self.dtype.descr,
                "data": (self.raw.data.ptr, False), "version": 3, "strides": None}

    def get(self) -> np.ndarray:
        import cupy as cp

        return cp.asnumpy(self.raw).view(self.dtype)
