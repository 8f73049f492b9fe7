"""CacheModifiedInputIterator: a device array read with a chosen cache policy."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..types import ValueType
from ._base import IteratorBase, IteratorCode, Member, PointerIterator, StateWriter

# modifier -> CUB's load modifier: PTX ld.global.cs (evict-first streaming), .cg (cache in
# L2 only), ld.volatile
_MODIFIERS = {"stream": "LOAD_CS", "global": "LOAD_CG", "volatile": "LOAD_VOLATILE"}


class CacheModifiedInputIterator(IteratorBase):
    """Items of ``array`` loaded with a cache modifier: ``"stream"`` (evict-first, for data
    read once), ``"global"`` (cached in L2 only) or ``"volatile"``.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32)
        it = cuprims.CacheModifiedInputIterator(x, modifier="stream")
    """

    __slots__ = ("_array", "_modifier")

    def __init__(self, array: Any, modifier: str = "stream"):
        super().__init__()
        if modifier not in _MODIFIERS:
            raise ArgumentError("modifier", f"one of {sorted(_MODIFIERS)}", modifier)
        self._array = PointerIterator(array, argument="array")
        self._modifier = modifier

    @property
    def value_type(self) -> ValueType:
        return self._array.value_type

    def _kind_key(self) -> str:
        return f"cache_modified({self.value_type.code},{self._modifier})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        vt = self.value_type
        code.note_type(vt)
        code.require("#include <cub/thread/thread_load.cuh>")
        name = code.new_name()
        members = [Member("ptr", f"const {vt.cpp}*", 8, 8)]
        load = f"CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::{_MODIFIERS[self._modifier]}>"
        code.define(name, members, vt, f"return {load}(ptr + i);")
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        self._array._pack(state, count, argument)
