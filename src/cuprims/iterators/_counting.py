"""CountingIterator: item i is ``start + i``."""

from __future__ import annotations


import numpy as np

from ..errors import ArgumentError
from ..types import ValueType, host_bytes, value_type
from ._base import IteratorBase, IteratorCode, Member, StateWriter


class CountingIterator(IteratorBase):
    """The sequence ``start, start + 1, start + 2, ...`` in ``start``'s dtype, computed on
    the fly (nothing is stored).

    Example::

        import numpy as np, cuprims
        it = cuprims.CountingIterator(np.int32(10))   # 10, 11, 12, ...
    """

    __slots__ = ("_vt", "_start")

    def __init__(self, start: np.number):
        super().__init__()
        dt = getattr(start, "dtype", None)
        if not isinstance(start, np.generic) or dt is None or dt.kind not in "iuf":
            raise ArgumentError("start", "a numpy integer or floating-point scalar, e.g. np.int32(0) (its dtype is "
                                "the iterator's)", start)
        self._vt: ValueType = value_type(dt, argument="start")
        self._start = host_bytes(start, self._vt, argument="start")

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _kind_key(self) -> str:
        return f"counting({self._vt.code})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        vt = self._vt
        code.note_type(vt)
        name = code.new_name()
        members = [Member("start", vt.cpp, vt.size, vt.alignment)]
        code.define(name, members, vt, f"return static_cast<{vt.cpp}>(start + static_cast<{vt.cpp}>(i));")
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        state.raw(self._start, self._vt.alignment)
