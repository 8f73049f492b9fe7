"""Block factories that rearrange a tile: radix and merge sorts of keys and of key-value
pairs, and exchanges between arrangements (re-exported by :mod:`cuprims.coop.block`;
``block.py`` beside this module holds the rest).

A thread's ``items`` are a local array of ``items_per_thread``. In the *blocked*
arrangement thread ``t`` holds tile positions ``t * n .. t * n + n - 1``; in the
*striped* one it holds ``t, t + T, t + 2T...`` (``T`` threads, ``n`` items). The
warp-striped arrangement is striped within each warp's own ``32 * n`` positions.
"""

from __future__ import annotations

from typing import Any

from cuprims._value_types import ValueType
from cuprims.coop._arguments import block_exchange_kind, comparator, python_callable
from cuprims.coop._spec import ProviderSpec, block_dims, element_type, items_count
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.errors import ArgumentError


def make_exchange(block_exchange_type: Any, dtype: Any, threads_per_block: Any, items_per_thread: int,
                  warp_time_slicing: bool = False, methods: Any = None) -> Any:
    """``exchange(items_in, items_out, temp_storage=None)``: the tile held by the block's
    threads in ``items_in``, rearranged into ``items_out`` (the same array may be both).
    ``warp_time_slicing`` uses one warp's worth of shared memory, in more steps.

    Example::

        to_blocked = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked,
                                              numba.int32, 128, 4)
        # in the kernel: to_blocked(items, items)
    """
    check_methods(methods)
    kind = block_exchange_kind(block_exchange_type)
    if not isinstance(warp_time_slicing, bool):
        raise ArgumentError("warp_time_slicing", "a bool", warp_time_slicing)
    dims = block_dims(threads_per_block)
    if "Warp" in kind.value and (dims[0] * dims[1] * dims[2]) % 32:
        # a warp-striped tile is made of whole warps: a partial last warp has no such layout
        raise ArgumentError("threads_per_block", "a multiple of 32 threads for a warp-striped exchange",
                            threads_per_block)
    spec = ProviderSpec("exchange", element_type(dtype), dims, items_count(items_per_thread),
                        "timesliced" if warp_time_slicing else "", mode=kind.value)
    return make_primitive(f"block.exchange.{kind.name}", spec)


def radix_key_type(dtype: Any) -> ValueType:
    """A radix sort's key type (ints and floats only)."""
    vt = element_type(dtype)
    # CUB's radix traits order every int and IEEE float: a float's bits are flipped into an
    # unsigned key, so -inf < negatives < zeros < positives < +inf (CUB's digit extractor
    # maps -0.0 onto +0.0: equal keys, left in their order), with NaNs of the sign bit 0
    # (numpy's np.nan) after +inf and those with the sign bit set before -inf
    if vt.dtype.kind not in "iuf" or vt.dtype.fields is not None:
        raise ArgumentError("dtype", "an integer or floating-point type", dtype)
    return vt


def _radix_sort(dtype: Any, threads_per_block: Any, items_per_thread: int, mode: str,
                value_dtype: Any = None, blocked_to_striped: Any = False) -> Any:
    vt = radix_key_type(dtype)
    values = None if value_dtype is None else element_type(value_dtype, "value_dtype")
    if not isinstance(blocked_to_striped, bool):
        raise ArgumentError("blocked_to_striped", "a bool", blocked_to_striped)
    spec = ProviderSpec("radix_sort", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        "striped" if blocked_to_striped else "", mode=mode, values=values)
    return make_primitive(f"block.radix_sort_{'keys' if values is None else 'pairs'}_{mode}", spec)


def make_radix_sort_keys(dtype: Any, threads_per_block: Any, items_per_thread: int,
                         blocked_to_striped: bool = False) -> Any:
    """``sort(keys, begin_bit=0, end_bit=-1, temp_storage=None)``: the block's tile of
    keys (each thread's ``keys``, a local array of ``items_per_thread``, in the blocked
    arrangement) sorted ascending in place, blocked: thread ``t`` ends with ranks
    ``t * items_per_thread ...`` (with ``blocked_to_striped=True``, striped: ranks ``t``,
    ``t + threads``..., ready for a coalesced store; CUB's ``SortBlockedToStriped``).
    Only bits ``[begin_bit, end_bit)`` are compared (``end_bit < 0``: all of them); the
    sort is stable, which shows only when some bits are left out.

    Example::

        sort = coop.block.make_radix_sort_keys(numba.float32, 256, 4)

        @cuda.jit(link=sort.files)
        def kernel(x):
            keys = cuda.local.array(4, numba.float32)
            base = cuda.blockIdx.x * 1024 + 4 * cuda.threadIdx.x
            for i in range(4):
                keys[i] = x[base + i]
            sort(keys)
            for i in range(4):
                x[base + i] = keys[i]
    """
    return _radix_sort(dtype, threads_per_block, items_per_thread, "ascending", None, blocked_to_striped)


def make_radix_sort_keys_descending(dtype: Any, threads_per_block: Any, items_per_thread: int,
                                    blocked_to_striped: bool = False) -> Any:
    """As :func:`make_radix_sort_keys`, largest key first (a NaN of numpy's kind first too).

    Example::

        sort_down = coop.block.make_radix_sort_keys_descending(numba.int64, (32, 4), 8)
        # in the kernel: sort_down(keys)
    """
    return _radix_sort(dtype, threads_per_block, items_per_thread, "descending", None, blocked_to_striped)


def make_radix_sort_pairs(dtype: Any, value_dtype: Any, threads_per_block: Any, items_per_thread: int,
                          blocked_to_striped: bool = False) -> Any:
    """``sort(keys, values, begin_bit=0, end_bit=-1, temp_storage=None)``: as
    :func:`make_radix_sort_keys`, each key carrying the value at the same place in the
    thread's ``values`` (a local array of ``items_per_thread`` of ``value_dtype``: any
    type, structs included). The sort is stable: values of equal keys keep their order
    (CUB's ``BlockRadixSort`` with a ``ValueT``).

    Example::

        sort = coop.block.make_radix_sort_pairs(numba.float32, numba.int32, 128, 4)
        # in the kernel: sort(keys, indices)      (an argsort of the block's tile)
    """
    return _radix_sort(dtype, threads_per_block, items_per_thread, "ascending", value_dtype, blocked_to_striped)


def make_radix_sort_pairs_descending(dtype: Any, value_dtype: Any, threads_per_block: Any,
                                     items_per_thread: int, blocked_to_striped: bool = False) -> Any:
    """As :func:`make_radix_sort_pairs`, largest key first (still stable: values of
    equal keys keep their order).

    Example::

        sort_down = coop.block.make_radix_sort_pairs_descending(numba.uint32, numba.float64, (32, 4), 2)
        # in the kernel: sort_down(keys, values)
    """
    return _radix_sort(dtype, threads_per_block, items_per_thread, "descending", value_dtype, blocked_to_striped)


def _merge_sort_spec(dtype: Any, threads_per_block: Any, items_per_thread: int, compare_op: Any,
                     value_dtype: Any = None) -> ProviderSpec:
    vt = element_type(dtype)
    values = None if value_dtype is None else element_type(value_dtype, "value_dtype")
    dims = block_dims(threads_per_block)
    threads = dims[0] * dims[1] * dims[2]
    if threads & (threads - 1):
        raise ArgumentError("threads_per_block", "a power of two threads in all (CUB's merge sort merges halves)",
                            threads_per_block)
    return ProviderSpec("merge_sort", vt, dims, items_count(items_per_thread), "",
                        comparator(compare_op, vt, "compare_op"), values=values)


def make_merge_sort_pairs(dtype: Any, value_dtype: Any, threads_per_block: Any, items_per_thread: int,
                          compare_op: Any, methods: Any = None) -> Any:
    """``sort(keys, values, num_valid=-1, oob_default=None, temp_storage=None)``: as
    :func:`make_merge_sort_keys`, each key carrying the value at the same place in the
    thread's ``values`` (a local array of ``items_per_thread`` of ``value_dtype``, any
    type); stable (CUB's ``BlockMergeSort::StableSort(keys, values, ...)``). With
    ``num_valid >= 0`` the first ``num_valid`` pairs are sorted, keys past them become
    ``oob_default`` and the values there are unspecified.

    Example::

        sort = coop.block.make_merge_sort_pairs(numba.int32, numba.float64, 128, 4, "<")
        # in the kernel: sort(keys, values)  or  sort(keys, values, n, 2**31 - 1)
    """
    check_methods(methods)
    spec = _merge_sort_spec(dtype, threads_per_block, items_per_thread, compare_op, value_dtype)
    return make_primitive("block.merge_sort_pairs", spec, python_callable(spec.op, compare_op))


def make_merge_sort_keys(dtype: Any, threads_per_block: Any, items_per_thread: int, compare_op: Any,
                         methods: Any = None) -> Any:
    """``sort(keys, num_valid=-1, oob_default=None, temp_storage=None)``: the block's tile
    of keys (each thread's ``keys``, a local array of ``items_per_thread``, blocked)
    sorted in place by ``compare_op``, blocked. The sort is stable (CUB's
    ``BlockMergeSort::StableSort``): keys that compare equal keep their order.

    ``compare_op`` is ``OpKind.LESS`` (ascending, NaN last), ``OpKind.GREATER`` or a Python
    function ``compare_op(a, b) -> bool``, true when ``a`` goes before ``b`` (a strict
    weak order; any key type, structs included). With ``num_valid >= 0`` only the tile's
    first ``num_valid`` keys are sorted and every later position ends as ``oob_default``,
    which must then be given and be ordered after every valid key (CUB's rule).
    ``threads_per_block`` must multiply out to a power of two (CUB merges halves).

    Example::

        sort = coop.block.make_merge_sort_keys(numba.float32, 128, 4, lambda a, b: a > b)

        @cuda.jit(link=sort.files)
        def kernel(x, n):
            keys = cuda.local.array(4, numba.float32)
            for i in range(4):
                keys[i] = x[4 * cuda.threadIdx.x + i]
            sort(keys, n, -numpy.inf)      # the first n keys, descending; -inf after them
            for i in range(4):
                x[4 * cuda.threadIdx.x + i] = keys[i]
    """
    check_methods(methods)
    spec = _merge_sort_spec(dtype, threads_per_block, items_per_thread, compare_op)
    return make_primitive("block.merge_sort_keys", spec, python_callable(spec.op, compare_op))
