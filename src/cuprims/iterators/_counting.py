"""CountingIterator: item i is ``start + i``."""

from __future__ import annotations

import numpy as np

from cuprims._value_types import host_bytes, value_type
from cuprims.errors import ArgumentError
from cuprims.iterators.base import ValueStateIterator


class CountingIterator(ValueStateIterator):
    """The sequence ``start, start + 1, start + 2, ...`` in ``start``'s dtype, computed on
    the fly (nothing is stored).

    Example::

        import numpy as np, cuprims
        it = cuprims.CountingIterator(np.int32(10))   # 10, 11, 12, ...
    """

    __slots__ = ()
    _kind = "counting"
    _value_name = "start"

    def __init__(self, start: np.number):
        super().__init__()
        dt = getattr(start, "dtype", None)
        if not isinstance(start, np.generic) or dt is None or dt.kind not in "iuf":
            raise ArgumentError("start", "a numpy integer or floating-point scalar, e.g. np.int32(0) (its dtype is "
                                "the iterator's)", start)
        self._vt = value_type(dt, argument="start")
        self._value = host_bytes(start, self._vt, argument="start")

    def _body(self) -> str:
        t = self._vt.cpp
        return f"return static_cast<{t}>(value + static_cast<{t}>(i));"
