"""Warp factories (re-exported by :mod:`cuprims.coop.warp`, which documents the calling
rules).
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._arguments import combiner, comparator, python_callable, warp_exchange_kind
from cuprims.coop._records import logical_warp_lanes
from cuprims.coop._spec import (WARP_LOAD_ALGORITHMS, WARP_STORE_ALGORITHMS, ProviderSpec, algorithm_of, element_type,
                                items_count)
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.op import OpKind, op_spec


def make_reduce(dtype: Any, binary_op: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``reduce(item, num_valid=-1, temp_storage=None) -> value``: the logical warp's
    reduction by ``binary_op``, valid in its first lane; ``num_valid`` counts its lanes.

    Example::

        warp_max = coop.warp.make_reduce(numba.int64, "max", threads_in_warp=16)
    """
    check_methods(methods)
    vt = element_type(dtype)
    lanes = logical_warp_lanes("warp_reduce", threads_in_warp)
    spec = ProviderSpec("warp_reduce", vt, (lanes, 1, 1), 1, "",
                        combiner(binary_op, vt, "binary_op"))
    return make_primitive("warp.reduce", spec, python_callable(spec.op, binary_op))


def make_sum(dtype: Any, threads_in_warp: int = 32) -> Any:
    """As :func:`make_reduce` with ``+`` (CUB's ``WarpReduce::Sum``).

    Example::

        warp_sum = coop.warp.make_sum(numba.float32)
    """
    lanes = logical_warp_lanes("warp_reduce", threads_in_warp)
    spec = ProviderSpec("warp_reduce", element_type(dtype), (lanes, 1, 1), 1, "",
                        op_spec(OpKind.PLUS))
    return make_primitive("warp.sum", spec)


def make_exclusive_sum(dtype: Any, threads_in_warp: int = 32) -> Any:
    """``exclusive_sum(item, temp_storage=None) -> value``: the sum of the items of the
    lanes before this one in its logical warp (0 in the first lane; CUB's
    ``WarpScan::ExclusiveSum``). Example::

        warp_xsum = coop.warp.make_exclusive_sum(numba.int32, threads_in_warp=16)
    """
    lanes = logical_warp_lanes("warp_scan", threads_in_warp)
    spec = ProviderSpec("warp_scan", element_type(dtype), (lanes, 1, 1), 1, "",
                        op_spec(OpKind.PLUS), mode="exclusive")
    return make_primitive("warp.exclusive_sum", spec)


def make_merge_sort_keys(dtype: Any, items_per_thread: int, compare_op: Any, threads_in_warp: int = 32,
                         methods: Any = None) -> Any:
    """``sort(keys, num_valid=-1, oob_default=None, temp_storage=None)``: the logical
    warp's tile of keys (each lane's ``keys``, a local array of ``items_per_thread``,
    blocked: lane ``l`` holds positions ``l * items_per_thread ...``) sorted in place by
    ``compare_op``, stably, as :func:`cuprims.coop.block.make_merge_sort_keys` sorts a
    block's (``num_valid`` and ``oob_default`` alike, counted in the warp's tile).

    Each slot of the primitive's own storage holds a whole tile, so it serves the first
    ``sort.own_storage_warps`` logical warps of a block (as many as fit in 32 KiB, at
    least one, at most a 1024-thread block's); a warp past them traps. Larger blocks
    pass ``temp_storage=`` (``sort.temp_storage_bytes`` per logical warp, each warp its own).

    Example::

        sort = coop.warp.make_merge_sort_keys(numba.int32, 4, lambda a, b: a < b, threads_in_warp=16)
        # in the kernel: sort(keys)     (16 lanes x 4 keys, per logical warp)
    """
    check_methods(methods)
    return _merge_sort(dtype, None, items_per_thread, compare_op, threads_in_warp)


def make_merge_sort_pairs(dtype: Any, value_dtype: Any, items_per_thread: int, compare_op: Any,
                          threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``sort(keys, values, num_valid=-1, oob_default=None, temp_storage=None)``: as
    :func:`make_merge_sort_keys`, each key carrying the value at the same place in the
    lane's ``values`` (a local array of ``items_per_thread`` of ``value_dtype``, any type);
    stable. With ``num_valid >= 0`` the values past the first ``num_valid`` pairs are
    unspecified (their keys become ``oob_default``). Storage as for the keys' sort
    (``sort.own_storage_warps``).

    Example::

        sort = coop.warp.make_merge_sort_pairs(numba.float32, numba.int32, 4, "<")
        # in the kernel: sort(keys, indices)    (32 lanes x 4 pairs, per warp)
    """
    check_methods(methods)
    return _merge_sort(dtype, value_dtype, items_per_thread, compare_op, threads_in_warp)


def _merge_sort(dtype: Any, value_dtype: Any, items_per_thread: int, compare_op: Any, threads_in_warp: Any) -> Any:
    vt = element_type(dtype)
    values = None if value_dtype is None else element_type(value_dtype, "value_dtype")
    lanes = logical_warp_lanes("warp_merge_sort", threads_in_warp)
    spec = ProviderSpec("warp_merge_sort", vt, (lanes, 1, 1), items_count(items_per_thread), "",
                        comparator(compare_op, vt, "compare_op"), values=values)
    name = "warp.merge_sort_keys" if values is None else "warp.merge_sort_pairs"
    return make_primitive(name, spec, python_callable(spec.op, compare_op))


def make_load(dtype: Any, items_per_thread: int = 1, algorithm: str = "direct", threads_in_warp: int = 32) -> Any:
    """``load(src, items, num_valid=-1, oob_default=None, temp_storage=None)``: the logical
    warp's tile from ``src`` (an array starting at the warp's tile; each warp passes its
    own) into each lane's ``items`` (a local array of ``items_per_thread``), blocked (lane
    ``l`` gets positions ``l * items_per_thread ...``). ``algorithm`` is one of CUB's
    WarpLoad algorithms: 'direct', 'striped' (lane ``l`` gets ``l, l + lanes...``),
    'vectorize', 'transpose' (striped reads, blocked result). With ``num_valid >= 0``
    only the tile's first ``num_valid`` items are read, the rest are ``oob_default`` (a
    value of the element type, a struct too; all bytes zero when not given, as
    ``block.make_load``'s). Traps, as ``block.make_load`` does, when ``src`` holds fewer
    than the items read or is strided, or ``items`` is short.

    'transpose' uses shared memory, a tile per logical warp: the own storage serves the
    first ``load.own_storage_warps`` warps of a block (as many as fit in 16 KiB, at least
    one, at most a 1024-thread block's); a warp past them traps. Larger blocks pass
    ``temp_storage=`` (``load.temp_storage_bytes`` per logical warp, each warp its own).

    Example::

        load = coop.warp.make_load(numba.float32, 4, "transpose")
        # in the kernel: load(x[(cuda.threadIdx.x // 32) * 128:], items)
    """
    return _tile_mover("load", WARP_LOAD_ALGORITHMS, dtype, items_per_thread, algorithm, threads_in_warp)


def make_store(dtype: Any, items_per_thread: int = 1, algorithm: str = "direct", threads_in_warp: int = 32) -> Any:
    """``store(dst, items, num_valid=-1, temp_storage=None)``: each lane's ``items`` into
    the logical warp's tile at ``dst`` (its first ``num_valid`` items only, when given);
    the algorithms and storage as :func:`make_load`'s ('transpose': blocked items,
    striped writes).

    Example::

        store = coop.warp.make_store(numba.float32, 4, "transpose")
        # in the kernel: store(y[(cuda.threadIdx.x // 32) * 128:], items)
    """
    return _tile_mover("store", WARP_STORE_ALGORITHMS, dtype, items_per_thread, algorithm, threads_in_warp)


def _tile_mover(what: str, algorithms: dict[str, str], dtype: Any, items_per_thread: int, algorithm: str,
                threads_in_warp: Any) -> Any:
    """A warp's load or store of its tile."""
    lanes = logical_warp_lanes(f"warp_{what}", threads_in_warp)
    spec = ProviderSpec(f"warp_{what}", element_type(dtype), (lanes, 1, 1),
                        items_count(items_per_thread), algorithm_of(algorithms, algorithm))
    return make_primitive(f"warp.{what}", spec)


def make_exchange(warp_exchange_type: Any, dtype: Any, items_per_thread: int, threads_in_warp: int = 32,
                  methods: Any = None) -> Any:
    """``exchange(items_in, items_out, temp_storage=None)``: the logical warp's tile held
    in its lanes' ``items_in`` (local arrays of ``items_per_thread``), rearranged into
    ``items_out`` (the same array may be both) by CUB's WarpExchange.

    Its TempStorage holds a tile: the own storage serves the first
    ``exchange.own_storage_warps`` logical warps of a block (as many as fit in 16 KiB); a
    warp past them traps. Larger blocks pass ``temp_storage=``
    (``exchange.temp_storage_bytes`` per logical warp, each warp its own).

    Example::

        to_blocked = coop.warp.make_exchange(coop.warp.WarpExchangeType.StripedToBlocked, numba.int32, 4)
        # in the kernel: to_blocked(items, items)
    """
    check_methods(methods)
    kind = warp_exchange_kind(warp_exchange_type)
    lanes = logical_warp_lanes("warp_exchange", threads_in_warp)
    spec = ProviderSpec("warp_exchange", element_type(dtype), (lanes, 1, 1), items_count(items_per_thread), "",
                        mode=kind.value)
    return make_primitive(f"warp.exchange.{kind.name}", spec)


def _make_shuffle(mode: str, dtype: Any, threads_in_warp: int, methods: Any) -> Any:
    check_methods(methods)
    lanes = logical_warp_lanes("warp_shuffle", threads_in_warp)
    spec = ProviderSpec("warp_shuffle", element_type(dtype), (lanes, 1, 1), 1, "", mode=mode)
    return make_primitive(f"warp.shuffle_{mode}", spec)


def make_shuffle_index(dtype: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``shuffle(item, src_lane) -> value``: the ``item`` of lane ``src_lane`` of this lane's
    logical warp (modulo its size), in every lane (CUB's ``ShuffleIndex``; any type, a
    struct too, moved a 32-bit word at a time). Every lane of the logical warp calls it.

    Example::

        broadcast = coop.warp.make_shuffle_index(numba.float64)

        @cuda.jit(link=broadcast.files)
        def kernel(x):
            x[cuda.threadIdx.x] = broadcast(x[cuda.threadIdx.x], 0)   # lane 0's value everywhere
    """
    return _make_shuffle("index", dtype, threads_in_warp, methods)


def make_shuffle_up(dtype: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``shuffle(item, delta) -> value``: the ``item`` of the lane ``delta`` below this one
    in its logical warp; a lane with none that far below gets its own (CUB's
    ``ShuffleUp``).

    Example::

        up = coop.warp.make_shuffle_up(numba.int32, threads_in_warp=16)
    """
    return _make_shuffle("up", dtype, threads_in_warp, methods)


def make_shuffle_down(dtype: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``shuffle(item, delta) -> value``: the ``item`` of the lane ``delta`` above this one
    in its logical warp; a lane with none that far above gets its own (CUB's
    ``ShuffleDown``).

    Example::

        down = coop.warp.make_shuffle_down(numba.int32)
    """
    return _make_shuffle("down", dtype, threads_in_warp, methods)


def make_shuffle_xor(dtype: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``shuffle(item, lane_mask) -> value``: the ``item`` of lane ``lane ^ lane_mask`` of
    this lane's logical warp (a butterfly exchange; ``lane`` counts from the logical warp's
    first lane).

    Example::

        butterfly = coop.warp.make_shuffle_xor(numba.float32)
    """
    return _make_shuffle("xor", dtype, threads_in_warp, methods)
