"""CacheModifiedInputIterator: a device array read with a chosen cache policy."""

from __future__ import annotations

from typing import Any

from cuprims._value_types import shown_dtype
from cuprims.errors import ArgumentError
from cuprims.iterators.base import IteratorCode, PointerIterator
from cuprims.typing import ArrayOrProxy

# modifier -> CUB's load modifier: PTX ld.global.cs (evict-first streaming), .cg (cache in
# L2 only), ld.volatile
_MODIFIERS = {"stream": "LOAD_CS", "global": "LOAD_CG", "volatile": "LOAD_VOLATILE"}


class CacheModifiedInputIterator(PointerIterator):
    """Items of ``array`` loaded with a cache modifier: ``"stream"`` (evict-first, for data
    read once), ``"global"`` (cached in L2 only) or ``"volatile"``.

    ``array`` is a device array (or a ``ProxyArray`` when building ahead of time): a cache
    modifier applies to loads from memory, so it wraps a pointer, never another iterator
    (as CUB's and cuda.compute's CacheModifiedInputIterator). It is read-only: an input.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32)
        it = cuprims.CacheModifiedInputIterator(x, modifier="stream")
    """

    __slots__ = ("_modifier",)

    def __init__(self, array: ArrayOrProxy, modifier: str = "stream"):
        if modifier not in _MODIFIERS:
            raise ArgumentError("modifier", f"one of {sorted(_MODIFIERS)}", modifier)
        super().__init__(array, argument="array")
        self._modifier = modifier

    def _writable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CacheModifiedInputIterator({shown_dtype(self._vt.dtype)} array, modifier={self._modifier!r})"

    def _kind_key(self) -> str:
        return f"cache_modified({self.value_type.code},{self._modifier})"

    def _read(self, code: IteratorCode) -> str:
        code.require("#include <cub/thread/thread_load.cuh>")
        return f"CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::{_MODIFIERS[self._modifier]}>(ptr + i)"
