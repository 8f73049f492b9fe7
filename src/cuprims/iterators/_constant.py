"""ConstantIterator: every item is the same value."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._value_types import host_bytes, value_type
from cuprims.errors import ArgumentError
from cuprims.iterators.base import ValueStateIterator
from cuprims.struct import StructBase


class ConstantIterator(ValueStateIterator):
    """``value, value, value, ...``: a numpy scalar, a gpu_struct instance or a numpy record
    (an ``np.void``, or a one-element structured array), repeated. Its type is the value's
    own: a dict or tuple of field values names none, so build the struct from it first
    (``S(d)``, ``S(*t)``).

    Example::

        import numpy as np, cuprims
        it = cuprims.ConstantIterator(np.float32(1.5))
    """

    __slots__ = ()
    _kind = "constant"

    def __init__(self, value: np.generic | np.ndarray | StructBase):
        super().__init__()
        data = getattr(value, "_cuprims_data", None)
        if data is not None:  # a gpu_struct instance
            dt = data.dtype
        elif isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.dtype.names is not None
                                               and value.size == 1):
            dt = value.dtype
        else:
            raise ArgumentError("value", "a numpy scalar (e.g. np.int32(7)), a gpu_struct instance or a numpy "
                                "record (a dict or tuple of field values has no type: build the struct from it, "
                                "S(d) or S(*t))", value)
        self._vt = value_type(dt, argument="value")
        self._value = host_bytes(value, self._vt, argument="value")

    def _body(self) -> str:
        return "return value;"
