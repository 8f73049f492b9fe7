"""What a cooperative primitive is, as plain hashable data (no numba, no CUDA imports).

A :class:`ProviderSpec` names one CUB specialization: the primitive, the element type,
the block shape (or logical warp size), items per thread, CUB's algorithm and the
operator. It is the input of the code generator and, through :attr:`ProviderSpec.key`,
part of the cache key; its :attr:`ProviderSpec.symbol` names the ``extern "C"``
functions of the provider, so two specializations never share a symbol (one kernel may
link many providers).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuprims._value_types import ValueType, value_type
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec

# Python names of CUB's algorithm enumerators, per primitive family
LOAD_ALGORITHMS = {
    "direct": "cub::BLOCK_LOAD_DIRECT", "striped": "cub::BLOCK_LOAD_STRIPED",
    "vectorize": "cub::BLOCK_LOAD_VECTORIZE", "transpose": "cub::BLOCK_LOAD_TRANSPOSE",
    "warp_transpose": "cub::BLOCK_LOAD_WARP_TRANSPOSE",
    "warp_transpose_timesliced": "cub::BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED",
}
STORE_ALGORITHMS = {
    "direct": "cub::BLOCK_STORE_DIRECT", "striped": "cub::BLOCK_STORE_STRIPED",
    "vectorize": "cub::BLOCK_STORE_VECTORIZE", "transpose": "cub::BLOCK_STORE_TRANSPOSE",
    "warp_transpose": "cub::BLOCK_STORE_WARP_TRANSPOSE",
    "warp_transpose_timesliced": "cub::BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED",
}
REDUCE_ALGORITHMS = {
    "raking": "cub::BLOCK_REDUCE_RAKING",
    "raking_commutative_only": "cub::BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY",
    "warp_reductions": "cub::BLOCK_REDUCE_WARP_REDUCTIONS",
}
# CUB's WarpLoad / WarpStore algorithms (a logical warp's tile)
WARP_LOAD_ALGORITHMS = {
    "direct": "cub::WARP_LOAD_DIRECT", "striped": "cub::WARP_LOAD_STRIPED",
    "vectorize": "cub::WARP_LOAD_VECTORIZE", "transpose": "cub::WARP_LOAD_TRANSPOSE",
}
WARP_STORE_ALGORITHMS = {
    "direct": "cub::WARP_STORE_DIRECT", "striped": "cub::WARP_STORE_STRIPED",
    "vectorize": "cub::WARP_STORE_VECTORIZE", "transpose": "cub::WARP_STORE_TRANSPOSE",
}
HISTOGRAM_ALGORITHMS = {"sort": "cub::BLOCK_HISTO_SORT", "atomic": "cub::BLOCK_HISTO_ATOMIC"}
SCAN_ALGORITHMS = {
    "raking": "cub::BLOCK_SCAN_RAKING", "raking_memoize": "cub::BLOCK_SCAN_RAKING_MEMOIZE",
    "warp_scans": "cub::BLOCK_SCAN_WARP_SCANS",
}

MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class ProviderSpec:
    """One provider. ``kind`` is one of load, store, reduce, scan, warp_reduce, warp_scan,
    radix_sort (``mode``: ascending/descending), exchange (``mode``: CUB's method name,
    ``algorithm``: "timesliced" or ""), merge_sort and warp_merge_sort (``op``: the
    comparator), warp_load, warp_store and warp_exchange (``mode``: CUB's method name),
    discontinuity (``mode``: heads, tails or heads_and_tails; ``op``: the flag operator),
    adjacent_difference (``mode``: left or right; ``op``: the difference) and histogram
    (``values``: the counter type; ``bins``: how many; ``algorithm``: sort or atomic),
    run_length_decode (``runs``: runs per thread; ``items``: decoded items per thread;
    ``values``: the run length type), block_shuffle and warp_shuffle (``mode``: which).

    ``dims`` is the block shape (x, y, z); for warp primitives (logical warp size, 1, 1).
    ``mode`` (scans): "inclusive" or "exclusive". ``init``: the scan's initial value as
    C++ text (None: none). ``op``: the combiner (None for load/store). ``values``: the
    value type of a sort of key-value pairs (None: keys only), or a discontinuity's flag type. ``prefix`` (block
    scans): the block prefix callback, a Python function ``prefix(state, aggregate)``
    called through :attr:`prefix_symbol`; ``prefix_state``: the element type of the 1-D
    array it takes as ``state``."""

    kind: str
    vt: ValueType
    dims: tuple[int, int, int]
    items: int
    algorithm: str
    op: OpSpec | None = None
    mode: str = ""
    init: str | None = None
    values: ValueType | None = None
    prefix: OpSpec | None = None
    prefix_state: ValueType | None = None
    bins: int = 0
    runs: int = 0

    @property
    def key(self) -> str:
        """Everything that changes the provider's code, as text."""
        op = f"{self.op.kind}:{self.op.key}" if self.op is not None else "-"
        key = (f"{self.kind}|{self.vt.code}|{self.dims}|{self.items}|{self.algorithm}|{op}|"
               f"{self.mode}|{self.init}")
        # only when set: the keys of every other provider (keys-only sorts, scans without
        # a callback) stay as they were
        if self.values is not None:
            key += f"|values={self.values.code}"
        if self.prefix is not None:
            key += f"|prefix:{self.prefix.kind}:{self.prefix.key}:{self.prefix_state.code}"
        if self.bins:
            key += f"|bins={self.bins}"
        if self.runs:
            key += f"|runs={self.runs}"
        return key

    @property
    def symbol(self) -> str:
        """The provider's function name (variants append ``_ts``, ``_valid``...)."""
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:16]
        return f"cuprims_coop_{self.kind}_{digest}"

    @property
    def op_symbol(self) -> str:
        """The symbol of the operator this provider calls: a RawOp's own name, else the
        symbol of the Python operator's pointer-ABI wrapper."""
        if self.op is not None and self.op.kind == "raw":
            return self.op.name
        return self.symbol + "_op"

    @property
    def prefix_symbol(self) -> str:
        """The symbol of the block prefix callback's wrapper (``void SYM_prefix(void* state_view,
        T* aggregate, T* out)``) this provider calls."""
        return self.symbol + "_prefix"

    @property
    def python_ops(self) -> tuple[tuple[str, OpSpec], ...]:
        """(symbol, OpSpec) of each Python function the provider calls, in build order (the
        combiner or comparator, then the prefix callback)."""
        ops = []
        if self.op is not None and self.op.kind == "python":
            ops.append((self.op_symbol, self.op))
        if self.prefix is not None:
            ops.append((self.prefix_symbol, self.prefix))
        return tuple(ops)

    @property
    def raw_ops(self) -> tuple[tuple[str, OpSpec], ...]:
        """(symbol, OpSpec) of the RawOp the provider calls, if any: its LTO-IR is linked as
        the user gave it."""
        if self.op is not None and self.op.kind == "raw":
            return ((self.op_symbol, self.op),)
        return ()

    @property
    def threads(self) -> int:
        x, y, z = self.dims
        return x * y * z


def block_dims(threads_per_block: Any, argument: str = "threads_per_block") -> tuple[int, int, int]:
    """``threads_per_block`` (an int or a 1-3 tuple) as (x, y, z).

    Example::

        >>> block_dims((32, 4))
        (32, 4, 1)
    """
    dims = tuple(threads_per_block) if isinstance(threads_per_block, (tuple, list)) else (threads_per_block,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                          for d in dims):
        raise ArgumentError(argument, "a positive int or a tuple of 1 to 3 positive ints", threads_per_block)
    dims = dims + (1,) * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_THREADS_PER_BLOCK:
        raise ArgumentError(argument, f"at most {MAX_THREADS_PER_BLOCK} threads in all", threads_per_block)
    return dims


def items_count(items_per_thread: Any, argument: str = "items_per_thread") -> int:
    if not isinstance(items_per_thread, int) or isinstance(items_per_thread, bool) or items_per_thread < 1:
        raise ArgumentError(argument, "a positive int", items_per_thread)
    return items_per_thread


def _is_numba_type(dtype: Any) -> bool:
    """Whether ``dtype`` is a numba type (numba imported: nobody made one otherwise)."""
    types = sys.modules.get("numba.core.types")
    return types is not None and isinstance(dtype, types.Type)


def element_type(dtype: Any, argument: str = "dtype") -> ValueType:
    """A numpy dtype, a numba type (a numba extension type too: see :mod:`._user_types`),
    a type name or a gpu_struct as a :class:`ValueType`.

    Example::

        >>> element_type("float32").cpp
        'float'
    """
    if isinstance(dtype, str):
        return value_type(dtype, argument=argument)
    if _is_numba_type(dtype):
        from cuprims.coop._user_types import extension_value_type, is_extension_type

        if is_extension_type(dtype):
            return extension_value_type(dtype, argument)
        if isinstance(getattr(dtype, "dtype", None), np.dtype) and dtype.dtype.names is not None:
            return value_type(dtype.dtype, argument=argument)   # a numba Record: its structured dtype
        # numba scalar types print as numpy names ("int32", "float16", "bool")
        name = {"bool": "bool", "boolean": "bool"}.get(str(dtype), str(dtype))
        return value_type(name, argument=argument)
    return value_type(dtype, argument=argument)


def algorithm_of(table: dict[str, str], algorithm: Any, argument: str = "algorithm") -> str:
    if algorithm not in table:
        raise ArgumentError(argument, "one of " + ", ".join(repr(k) for k in table), algorithm)
    return algorithm
