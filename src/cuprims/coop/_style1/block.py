"""Block factories of loads, stores, reductions and scans (re-exported by
:mod:`cuprims.coop.block`, which documents the calling rules; ``block_tiles.py`` holds the
factories that rearrange a tile).
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._arguments import combiner, prefix_callback, python_callable, value_bytes
from cuprims.coop._spec import (LOAD_ALGORITHMS, REDUCE_ALGORITHMS, SCAN_ALGORITHMS, STORE_ALGORITHMS, ProviderSpec,
                                algorithm_of, block_dims, element_type, items_count)
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, op_spec


def make_load(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``load(src, items, num_valid=-1, oob_default=None, temp_storage=None)``: the block's
    tile from ``src`` (an array starting at the tile; contiguous) into each thread's
    ``items`` (a local array of ``items_per_thread``). With ``num_valid >= 0`` only the
    tile's first ``num_valid`` items are read and the rest are ``oob_default`` (a value of
    the element type, a struct too; all bytes zero when not given). The kernel traps when
    ``src`` holds fewer than the items read (the tile, or ``num_valid`` of it) or is
    strided, or ``items`` is shorter than ``items_per_thread``.

    Example::

        load = coop.block.make_load(numba.float32, 128, 4)
        # in the kernel: load(x[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("load", element_type(dtype), block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(LOAD_ALGORITHMS, algorithm))
    return make_primitive("block.load", spec)


def make_store(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``store(dst, items, num_valid=-1, temp_storage=None)``: each thread's ``items`` into
    the block's tile at ``dst`` (its first ``num_valid`` items only, when given); traps
    as :func:`make_load` does when ``dst`` cannot take them.

    Example::

        store = coop.block.make_store(numba.float32, 128, 4)
        # in the kernel: store(y[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("store", element_type(dtype), block_dims(threads_per_block),
                        items_count(items_per_thread), algorithm_of(STORE_ALGORITHMS, algorithm))
    return make_primitive("block.store", spec)


def make_reduce(dtype: Any, threads_per_block: Any, binary_op: Any, items_per_thread: int = 1,
                algorithm: str = "warp_reductions", methods: Any = None) -> Any:
    """``reduce(item, num_valid=-1, temp_storage=None)`` (one item per thread) or
    ``reduce(items, temp_storage=None)`` (a local array): the block's reduction by
    ``binary_op`` (an OpKind, '+', 'min', 'max'..., or a Python function), valid in thread 0.

    Example::

        block_max = coop.block.make_reduce(numba.float32, 128, lambda a, b: max(a, b))
    """
    check_methods(methods)
    vt = element_type(dtype)
    spec = ProviderSpec("reduce", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(REDUCE_ALGORITHMS, algorithm), combiner(binary_op, vt, "binary_op"))
    return make_primitive("block.reduce", spec, binary_op)


def make_sum(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "warp_reductions",
             methods: Any = None) -> Any:
    """As :func:`make_reduce` with ``+`` (CUB's ``Sum``).

    Example::

        block_sum = coop.block.make_sum(numba.int32, (32, 4), items_per_thread=4)
    """
    check_methods(methods)
    spec = ProviderSpec("reduce", element_type(dtype), block_dims(threads_per_block),
                        items_count(items_per_thread), algorithm_of(REDUCE_ALGORITHMS, algorithm),
                        op_spec(OpKind.PLUS))
    return make_primitive("block.sum", spec)


def make_scan(dtype: Any, threads_per_block: Any, items_per_thread: int, initial_value: Any = None,
              mode: str = "exclusive", scan_op: Any = "+", block_prefix_callback_op: Any = None,
              algorithm: str = "raking", methods: Any = None) -> Any:
    """A block-wide scan. One item per thread: ``scan(item, temp_storage=None) -> value``;
    more: ``scan(items_in, items_out, temp_storage=None)`` (the same array may be both).

    ``mode`` is "exclusive" or "inclusive"; ``scan_op`` an OpKind, '+', 'min'... or a
    Python function; ``initial_value`` seeds the scan (an exclusive scan by another
    operator than '+' without one leaves thread 0's first output undefined, as in CUB).

    ``block_prefix_callback_op`` (CUB's ``BlockPrefixCallbackOp``; ``prefix_op`` of the
    other scan factories) seeds each call with a prefix computed from the block's
    aggregate, to scan a long sequence tile after tile with a running total: a Python
    function ``prefix(state, block_aggregate) -> prefix`` (or a :class:`PrefixCallback`
    for a state of another type). The calls then take the state, a 1-D C-contiguous array
    the kernel owns (of the scan's dtype unless a PrefixCallback says otherwise; usually
    ``cuda.local.array(1, ...)``): ``scan(item, prefix_state, temp_storage=None) -> value``
    and ``scan(items_in, items_out, prefix_state, temp_storage=None)``. In each call:

    * the block's aggregate of this call's items is computed first (by ``scan_op``);
    * threads of the block's first warp call ``prefix(prefix_state, aggregate)``, each
      with its own ``prefix_state`` and the same aggregate; thread 0 always does, some or
      all of lanes 1..31 too (depending on CUB's algorithm), no thread outside warp 0 ever
      does. Only thread 0's result is used; so keep the state thread-local and read it in
      thread 0 (a shared state would be updated once per calling lane);
    * the result ``p`` prefixes the scan: an inclusive scan gives ``op(p, x0), op(p, x0,
      x1)...``, an exclusive one ``p, op(p, x0)...`` (``p`` is thread 0's first output).

    A callback that returns its state before adding the aggregate keeps a running total::

        def running_total(state, aggregate):
            old = state[0]
            state[0] = old + aggregate
            return old

        scan = coop.block.make_scan(numba.int32, 128, 4, mode="inclusive",
                                    block_prefix_callback_op=running_total)

        @cuda.jit(link=scan.files)
        def kernel(x, y, n):                    # one block scans all of x, 512 items at a time
            total = cuda.local.array(1, numba.int32)
            total[0] = 0
            items = cuda.local.array(4, numba.int32)
            for base in range(0, n, 512):       # n a multiple of 512 here
                for i in range(4):
                    items[i] = x[base + 4 * cuda.threadIdx.x + i]
                scan(items, items, total)
                for i in range(4):
                    y[base + 4 * cuda.threadIdx.x + i] = items[i]

    With a prefix callback ``initial_value`` must be left out (the prefix takes its place).

    Example::

        scan = coop.block.make_scan(numba.int32, 128, 8, mode="inclusive")
    """
    if scan_op is None:   # None stands for CUB's Sum only between the sum factories and _scan
        raise ArgumentError("scan_op", "an OpKind, its name ('+', 'max'...) or a Python function", None)
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, mode, scan_op,
                 block_prefix_callback_op, algorithm, methods, "block_prefix_callback_op")


def _scan(dtype: Any, threads_per_block: Any, items_per_thread: int, initial_value: Any, mode: str, scan_op: Any,
          prefix_op: Any, algorithm: str, methods: Any, prefix_argument: str) -> Any:
    check_methods(methods)
    if mode not in ("exclusive", "inclusive"):
        raise ArgumentError("mode", "'exclusive' or 'inclusive'", mode)
    vt = element_type(dtype)
    # scan_op None: the sum factories, CUB's Sum, on every type as make_sum (bool: a logical or)
    op = op_spec(OpKind.PLUS) if scan_op is None else combiner(scan_op, vt, "scan_op")
    init = None if initial_value is None else value_bytes(initial_value, vt, "initial_value")
    prefix = state = fn = None
    if prefix_op is not None:
        if initial_value is not None:
            raise ArgumentError("initial_value", "None with a block prefix callback (its prefix seeds the scan)",
                                initial_value)
        prefix, state, fn = prefix_callback(prefix_op, vt, prefix_argument)
    spec = ProviderSpec("scan", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(SCAN_ALGORITHMS, algorithm), op, mode=mode, init=init, prefix=prefix,
                        prefix_state=state)
    return make_primitive(f"block.{mode}_scan", spec, python_callable(op, scan_op), prefix=fn)


def make_exclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Exclusive prefix sum (thread 0's first output is 0, or the prefix ``prefix_op``
    returns: a block prefix callback as :func:`make_scan`'s ``block_prefix_callback_op``,
    the calls then taking its state array after the items). Example::

        xsum = coop.block.make_exclusive_sum(numba.int32, 128, 4)
    """
    return _scan(dtype, threads_per_block, items_per_thread, None, "exclusive", None, prefix_op, algorithm, methods,
                 "prefix_op")


def make_inclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Inclusive prefix sum; ``prefix_op``: a block prefix callback, as :func:`make_scan`'s
    ``block_prefix_callback_op``. Example::

        isum = coop.block.make_inclusive_sum(numba.int32, 128, 8)
    """
    return _scan(dtype, threads_per_block, items_per_thread, None, "inclusive", None, prefix_op, algorithm, methods,
                 "prefix_op")


def make_exclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Exclusive scan by ``scan_op``; ``prefix_op``: a block prefix callback, as
    :func:`make_scan`'s ``block_prefix_callback_op`` (then without ``initial_value``). Example::

        xmax = coop.block.make_exclusive_scan(numba.int32, 128, "max", 4, initial_value=-1)
    """
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, "exclusive", scan_op, prefix_op,
                 algorithm, methods, "prefix_op")


def make_inclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Inclusive scan by ``scan_op``; ``prefix_op``: a block prefix callback, as
    :func:`make_scan`'s ``block_prefix_callback_op`` (then without ``initial_value``). Example::

        imin = coop.block.make_inclusive_scan(numba.float32, 128, "min", 2)
    """
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, "inclusive", scan_op, prefix_op,
                 algorithm, methods, "prefix_op")
