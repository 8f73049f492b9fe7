"""``it + n``: an iterator advanced by ``n`` items, as cuda.compute's iterators add.

Item ``i`` of ``it + n`` is item ``i + n`` of ``it`` (read, or written for an output
iterator). It is the usual way to write end offsets from start offsets::

    start = cuprims.TransformIterator(cuprims.CountingIterator(np.int64(0)), lambda i: i * 256)
    end = start + 1                   # item i: start's item i + 1

The distance is part of the iterator's state, not of its code: ``it + 1`` and ``it + 7``
share one build. Adding to an advanced iterator adds the distances.
"""

from __future__ import annotations

import operator
import struct
from typing import Any

from cuprims._value_types import ValueType
from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.iterators.base import (MAX_ITERATOR_DEPTH, IteratorBase, IteratorCode, Member, StateWriter, emit_member,
                                    pack_member)

_MAX_DISTANCE = (1 << 63) - 1


class AdvancedIterator(IteratorBase):
    """``base`` advanced by ``by`` items (made by ``base + by``)."""

    __slots__ = ("_base", "_by")

    def __init__(self, base: IteratorBase, by: int):
        super().__init__()
        self._base, self._by = base, by

    @property
    def value_type(self) -> ValueType:
        return self._base.value_type

    def _writable(self) -> bool:
        return self._base._writable()

    def _inner(self) -> tuple[IteratorBase, ...]:
        return (self._base,)

    def _kind_key(self) -> str:
        return f"advanced({self._base._key()})"

    def __repr__(self) -> str:
        return f"{self._base!r} + {self._by}"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        base = emit_member(code, self._base, "base")
        members = [base, Member("by", "long long", 8, 8)]
        name = code.new_name()
        code.define(name, members, self.value_type, "return base[i + by];",
                    write="base.write(i + by, v);" if code.output and self._base._writable() else None)
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        # the base is read from item `by` on: an array under it must hold `by` items more
        pack_member(state, self._base, None if count is None else count + self._by, argument)
        state.raw(struct.pack("<q", self._by), 8)


def advanced(it: IteratorBase, n: Any) -> IteratorBase:
    """``it + n`` (``n`` a non-negative integer; a numpy integer too)."""
    if isinstance(n, bool):
        raise ArgumentTypeError("n", "an integer number of items to advance by", n)
    try:
        by = operator.index(n)
    except TypeError:
        return NotImplemented
    if by < 0 or by > _MAX_DISTANCE:
        raise ArgumentError("n", "a number of items to advance by from 0 to 2**63 - 1 (an iterator is not moved "
                            "back)", n)
    if isinstance(it, AdvancedIterator):
        if it._by + by > _MAX_DISTANCE:
            raise ArgumentError("n", "a number of items that keeps the distance under 2**63", n)
        return AdvancedIterator(it._base, it._by + by)
    if it._depth() >= MAX_ITERATOR_DEPTH:
        raise ArgumentError("n", f"an iterator at most {MAX_ITERATOR_DEPTH - 1} levels deep to advance",
                            f"an iterator {it._depth()} levels deep")
    return AdvancedIterator(it, by)
