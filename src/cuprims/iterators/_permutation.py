"""PermutationIterator: items of one sequence picked by the indices in another."""

from __future__ import annotations

from typing import Any

from cuprims._value_types import ValueType
from cuprims.errors import ArgumentError
from cuprims.iterators.base import (IteratorBase, IteratorCode, Member, StateWriter, as_input, as_iterator, emit_member,
                                    pack_member)
from cuprims.typing import ArrayIteratorOrProxy


class PermutationIterator(IteratorBase):
    """Item i is ``values[indices[i]]``; ``values`` and ``indices`` are device arrays or
    iterators, ``indices`` of an integer type and readable (an array or an input
    iterator, also when the permutation is an output). Over an array of values it is also
    an output (a scatter): item i is stored at ``values[indices[i]]``.

    Example::

        import cupy as cp, numpy as np, cuprims
        v = cp.asarray([10, 20, 30], dtype=np.float32); idx = cp.asarray([2, 0], dtype=np.int64)
        it = cuprims.PermutationIterator(v, idx)   # 30, 10
    """

    __slots__ = ("_values", "_indices")

    def __init__(self, values: ArrayIteratorOrProxy, indices: ArrayIteratorOrProxy):
        super().__init__()
        self._values = as_iterator(values, "values")
        self._indices = as_input(indices, "indices")  # read as an input and as an output
        idx = self._indices.value_type
        if idx.is_struct or idx.kind not in "iu":
            raise ArgumentError("indices", "integer indices", idx.dtype)

    @property
    def value_type(self) -> ValueType:
        return self._values.value_type

    def _writable(self) -> bool:
        return self._values._writable()

    def _inner(self) -> tuple[IteratorBase, ...]:
        return (self._values, self._indices)

    def _shown(self) -> list[str]:
        return [f"values={self._values!r}", f"indices={self._indices!r}"]

    def _kind_key(self) -> str:
        return f"permutation({self._values._key()},{self._indices._key()})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        values = emit_member(code, self._values, "values")
        indices = emit_member(code, self._indices, "indices")
        name = code.new_name()
        code.define(name, [values, indices], self.value_type,
                    "return values[static_cast<long long>(indices[i])];",
                    write="values.write(static_cast<long long>(indices[i]), v);" if code.output else None)
        return name, [values, indices]

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        # which values are read depends on the indices: their count is not known here
        pack_member(state, self._values, None, f"{argument} (values)")
        pack_member(state, self._indices, count, f"{argument} (indices)")
