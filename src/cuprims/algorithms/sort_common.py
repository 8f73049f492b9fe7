"""Pieces shared by the sorting algorithms: :class:`DoubleBuffer`, the sort order, opaque
values, CUB's temporary-storage layout, and device-to-device copies (the sort objects'
shared base is in :mod:`.sort_base`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cuprims._runtime import driver
from cuprims._value_types import ValueType, value_type
from cuprims.algorithms.arguments import signature
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError, CudaError
from cuprims.typing import ArrayOrProxy

__all__ = ["DoubleBuffer", "SortOrder"]

# CUB's alias_temporaries(): every allocation starts on this boundary.
TEMP_ALIGN = 256


class DoubleBuffer:
    """Two device buffers of one dtype, one of which is "current" (CUB's ``DoubleBuffer``).

    Passing a DoubleBuffer as ``d_in_keys`` (and ``d_in_values``) lets the sort use both
    buffers as scratch instead of allocating a copy: it starts from ``current()``, may
    ping-pong between the two, and leaves the sorted data in whichever buffer
    ``current()`` names afterwards (``selector`` is updated by the call).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.random.randint(0, 100, 1000, dtype=np.int32))
        db = cuprims.DoubleBuffer(keys, cp.empty_like(keys))
        cuprims.radix_sort(d_in_keys=db, d_out_keys=None, num_items=keys.size,
                           order=cuprims.SortOrder.ASCENDING)
        sorted_keys = db.current()
    """

    __slots__ = ("d_buffers", "selector")

    def __init__(self, d_current: ArrayOrProxy, d_alternate: ArrayOrProxy):
        if d_current is None or d_alternate is None:
            raise ArgumentError("d_current" if d_current is None else "d_alternate", "a device array", None)
        self.d_buffers = [d_current, d_alternate]
        self.selector = 0

    def _cuprims_signature(self) -> Any:
        """What a sort's description reads of a DoubleBuffer (its type and both halves' kinds;
        None where a half has none to give): see ``_arguments.signature``."""
        halves = (signature(self.current()), signature(self.alternate()))
        return None if None in halves else (DoubleBuffer, halves)

    def current(self) -> ArrayOrProxy:
        """The buffer holding the data (the input before a sort, the result after)."""
        return self.d_buffers[self.selector]

    def alternate(self) -> ArrayOrProxy:
        """The other buffer."""
        return self.d_buffers[self.selector ^ 1]

    @property
    def dtype(self) -> Any:
        from cuprims._runtime.arrays import array_dtype

        return array_dtype(self.current(), "d_current")

    def __repr__(self) -> str:
        return f"DoubleBuffer(selector={self.selector}, buffers={self.d_buffers!r})"


def parse_order(order: Any) -> SortOrder:
    if isinstance(order, SortOrder):
        return order
    if isinstance(order, str):
        try:
            return SortOrder[order.strip().upper()]
        except KeyError:
            pass
    elif isinstance(order, int) and not isinstance(order, bool):
        try:
            return SortOrder(order)
        except ValueError:
            pass
    elif getattr(order, "name", None) in ("ASCENDING", "DESCENDING"):  # another library's SortOrder enum
        return SortOrder[order.name]
    raise ArgumentError("order", "SortOrder.ASCENDING or SortOrder.DESCENDING", order)


def opaque_value_type(dtype: Any, argument: str) -> ValueType:
    """The value type of sort values, which the kernels only move: any numpy dtype works,
    packed structs too (carried as bytes with the alignment numpy gives them)."""
    try:
        return value_type(dtype, argument=argument)
    except ArgumentError:
        dt = np.dtype(getattr(dtype, "_cuprims_dtype", dtype))
        if dt.itemsize == 0 or dt.hasobject:
            raise
        return ValueType(code=f"bytes:{dt.itemsize}:{dt.alignment}", dtype=dt, cpp=f"cuprims_bytes_{dt.itemsize}",
                         size=dt.itemsize, alignment=dt.alignment)


def temp_layout(sizes: Sequence[int]) -> tuple[list[int], int]:
    """CUB's alias_temporaries(): (offsets from the 256-aligned base, bytes to allocate)."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total -= -size // TEMP_ALIGN * TEMP_ALIGN  # size rounded up to TEMP_ALIGN (inline: this runs per call)
    return offsets, total + TEMP_ALIGN - 1


def align_base(ptr: int) -> int:
    return -(-ptr // TEMP_ALIGN) * TEMP_ALIGN


def overlaps(p0: int, n0: int, p1: int, n1: int) -> bool:
    return n0 > 0 and n1 > 0 and p0 < p1 + n1 and p1 < p0 + n0


_driver_functions: dict[str, Any] = {}


def _driver_call(name: str, detail: str, *args: Any) -> None:
    """Call cuda.bindings' driver function ``name``; raise CudaError if it fails."""
    fn = _driver_functions.get(name)
    if fn is None:
        from cuprims._base.lazy import driver_bindings

        fn = _driver_functions[name] = getattr(driver_bindings(), name)
    err = fn(*args)[0]
    if err:
        raise CudaError(name, driver.error_name(int(err)), detail)


def memcpy_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Stream-ordered device-to-device copy (CUB copies when the bit range is empty)."""
    if nbytes > 0 and dst != src:
        _driver_call("cuMemcpyAsync", f"{nbytes} bytes", dst, src, nbytes, stream)


def zero_words_async(ptr: int, count: int, stream: int) -> None:
    """Stream-ordered zero-fill of ``count`` 4-byte words (the driver's memset is faster
    than a one-word-per-thread kernel for the megabytes of look-back flags a large sort clears)."""
    if count > 0:
        _driver_call("cuMemsetD32Async", f"{count} words", ptr, 0, count, stream)
