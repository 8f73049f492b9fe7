"""The one argument layer: every ``d_*`` argument, input or output, goes through here.

At build time :func:`describe` turns an argument into an :class:`ArgKind`: a device array
(or ``ProxyArray``) is the ``pointer`` kind of its value type; an iterator is taken as it
is, described by its own code key. At call time :meth:`ArgKind.bind` checks the argument
against that description and returns the kernel parameter: a pointer for an array (checked
for device memory, contiguity, length and the alignment its C++ type needs), the packed
state struct for an iterator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _arrays
from ..errors import ArgumentError, ArgumentTypeError
from ..iterators._base import IteratorBase
from ..types import ValueType, value_type
from ._common import frozen

POINTER = "pointer"


@frozen
class ArgKind:
    """What a build knows of one ``d_*`` argument (hashable, no user objects).

    ``key`` is ``"pointer"`` for a device array, else the iterator's code key;
    ``alignment`` is what the kernel's loads and stores need of an array's address.
    """

    name: str
    key: str
    value: ValueType
    alignment: int
    state_size: int = 8
    state_alignment: int = 8

    @property
    def is_pointer(self) -> bool:
        return self.key == POINTER

    @property
    def param(self) -> Any:
        """This argument's kernel parameter kind, as :class:`driver.ParamPack` takes it."""
        return "ptr" if self.key == POINTER else self.state_size

    def bind(self, x: Any, count: int, count_name: str | None = "num_items") -> Any:
        """The kernel parameter for ``x`` reading or writing ``count`` items."""
        if self.key == POINTER:
            if isinstance(x, IteratorBase):
                raise ArgumentError(self.name, "a device array (as at build time)", x)
            return _arrays.checked_pointer(x, self.name, self.value.dtype, count, self.alignment - 1, count_name)
        if not isinstance(x, IteratorBase) or x._key() != self.key:
            raise ArgumentError(self.name, f"an iterator of the kind this object was built for ({self.key})", x)
        return x._state(count, self.name)

    def pointer(self, x: Any, count: int, count_name: str | None = "num_items") -> int:
        """``x``'s checked device pointer (for arguments that take arrays only)."""
        return _arrays.checked_pointer(x, self.name, self.value.dtype, count, self.alignment - 1, count_name)


def describe(x: Any, name: str, *, iterators: bool = False, vt: ValueType | None = None,
             alignment: int | None = None) -> ArgKind:
    """The build-time description of argument ``name``.

    ``iterators`` says whether this argument may be an iterator; ``vt`` overrides the
    value type read from the array's dtype (e.g. opaque sort values), ``alignment`` the
    address alignment the kernel needs (default: the C++ type's)."""
    if isinstance(x, IteratorBase):
        if not iterators:
            raise ArgumentTypeError(name, "a device array (this argument does not take iterators yet)", x)
        size, align = x._struct_layout()
        return ArgKind(name, x._key(), x.value_type, 1, size, align)
    if x is None:
        raise ArgumentError(name, "a device array", None)
    if vt is not None:
        return ArgKind(name, POINTER, vt, vt.alignment if alignment is None else alignment)
    dt = _arrays.array_dtype(x, name)
    memo = (name, dt)
    kind = _array_kinds.get(memo)
    if kind is None:
        vt = value_type(dt, argument=name)
        kind = _array_kinds[memo] = ArgKind(name, POINTER, vt, vt.alignment)
    return kind


# (argument name, dtype) -> its pointer ArgKind: one object per pair, whose hash is computed once
_array_kinds: dict[tuple[str, np.dtype], ArgKind] = {}
