"""ReverseIterator: an array from its last item backwards, or an iterator walked backwards."""

from __future__ import annotations

from typing import Any

from cuprims._value_types import ValueType
from cuprims.iterators.base import (IteratorBase, IteratorCode, Member, StateWriter, as_iterator, emit_member,
                                    pack_member)
from cuprims.typing import ArrayIteratorOrProxy


class ReverseIterator(IteratorBase):
    """Item i is ``underlying[len - 1 - i]`` for a device array, ``underlying[-i]`` for an
    iterator (a CountingIterator(np.int32(9)) reversed counts 9, 8, 7, ...). Over an array
    (or a writable iterator) it is also an output: item i is stored at ``underlying[len - 1 - i]``.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(5, dtype=np.int32)
        it = cuprims.ReverseIterator(x)   # 4, 3, 2, 1, 0
    """

    __slots__ = ("_under",)

    def __init__(self, underlying: ArrayIteratorOrProxy):
        super().__init__()
        self._under = as_iterator(underlying, "underlying", from_end=True)

    @property
    def value_type(self) -> ValueType:
        return self._under.value_type

    def _inner(self) -> tuple[IteratorBase, ...]:
        return (self._under,)

    def _kind_key(self) -> str:
        return f"reverse({self._under._key()})"

    def _writable(self) -> bool:
        return self._under._writable()

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        member = emit_member(code, self._under, "under")
        name = code.new_name()
        code.define(name, [member], self.value_type, "return under[-i];",
                    write="under.write(-i, v);" if code.output else None)
        return name, [member]

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        pack_member(state, self._under, count, argument)
