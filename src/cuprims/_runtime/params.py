"""Kernel parameter blocks: the bytes each kind of parameter takes, and :class:`ParamPack`,
a kernel's ``void*[]`` laid out once and rewritten in place at each launch.

Pure host memory (ctypes buffers, ``struct``): nothing here calls the driver, so a
deserialized object lays out its parameters without one.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Sequence


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
