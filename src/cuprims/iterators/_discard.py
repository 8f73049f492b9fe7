"""DiscardIterator: an output that drops what is written (and reads as zeros)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._runtime import arrays as _arrays
from cuprims._value_types import ValueType, shown_dtype, value_type
from cuprims.iterators.base import IteratorBase, IteratorCode, Member, StateWriter
from cuprims.typing import ArrayIteratorOrProxy


class DiscardIterator(IteratorBase):
    """Writes to it are dropped; reads give zero values.

    Its value type is ``reference_iterator``'s (a device array or an iterator), or
    ``uint8`` without one. Useful where an algorithm insists on an output you do not need.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32)
        cuprims.inclusive_scan(d_in=x, d_out=cuprims.DiscardIterator(x), op=cuprims.OpKind.PLUS,
                               num_items=10)   # computes and drops the scan
    """

    __slots__ = ("_vt",)

    def __init__(self, reference_iterator: ArrayIteratorOrProxy | None = None):
        super().__init__()
        if reference_iterator is None:
            self._vt = value_type(np.uint8)
        elif isinstance(reference_iterator, IteratorBase):
            self._vt = reference_iterator.value_type
        else:
            self._vt = value_type(_arrays.array_dtype(reference_iterator, "reference_iterator"),
                                  argument="reference_iterator")

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _writable(self) -> bool:
        return True

    def _readable(self) -> bool:
        return False

    def _kind_key(self) -> str:
        return f"discard({self._vt.code})"

    def _shown(self) -> list[str]:
        return [f"items of {shown_dtype(self._vt.dtype)}"]

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        code.note_type(self._vt)
        name = code.new_name()
        code.define(name, [], self._vt, "return {};", write="(void)i; (void)v;" if code.output
                    else None)
        return name, []

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        pass
