"""ConstantIterator: every item is the same value."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..types import ValueType, host_bytes, value_type
from ._base import IteratorBase, IteratorCode, Member, StateWriter


class ConstantIterator(IteratorBase):
    """``value, value, value, ...``: a numpy scalar or a gpu_struct instance, repeated.

    Example::

        import numpy as np, cuprims
        it = cuprims.ConstantIterator(np.float32(1.5))
    """

    __slots__ = ("_vt", "_value")

    def __init__(self, value: Any):
        super().__init__()
        data = getattr(value, "_cuprims_data", None)
        if data is not None:  # a gpu_struct instance
            dt = data.dtype
        elif isinstance(value, np.generic):
            dt = value.dtype
        else:
            raise ArgumentError("value", "a numpy scalar (e.g. np.int32(7)) or a gpu_struct instance", value)
        self._vt: ValueType = value_type(dt, argument="value")
        self._value = host_bytes(value, self._vt, argument="value")

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _kind_key(self) -> str:
        return f"constant({self._vt.code})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        vt = self._vt
        code.note_type(vt)
        name = code.new_name()
        members = [Member("value", vt.cpp, vt.size, vt.alignment)]
        code.define(name, members, vt, "return value;")
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        state.raw(self._value, self._vt.alignment)
